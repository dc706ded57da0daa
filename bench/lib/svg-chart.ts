// A dependency-free SVG line chart: one panel per series, stacked, sharing the time axis.

/** One series: points as [x, y], drawn in its own panel. */
export interface Series {
  label: string;
  unit: string;
  color: string;
  points: [number, number][];
}

const WIDTH = 800;
const PANEL = 220;
const LEFT = 70;
const RIGHT = 20;
const TOP = 60;
const GAP = 50;

function esc(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** 1, 2 or 5 times a power of ten, about a fifth of the span. */
function niceStep(span: number): number {
  const raw = span / 5 || 1;
  const pow = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * pow).find((s) => s >= raw) ?? raw;
}

function fmt(n: number): string {
  return Number(n.toPrecision(6)).toString();
}

/** The chart as an SVG document: `title` on top, `xLabel` under the last panel. */
export function lineChartSvg(title: string, xLabel: string, series: Series[]): string {
  const height = TOP + series.length * (PANEL + GAP) + 10;
  const plotW = WIDTH - LEFT - RIGHT;
  const xs = series.flatMap((s) => s.points.map(([x]) => x));
  const xMin = Math.min(...xs, 0);
  const xStep = niceStep(Math.max(...xs, xMin + 1) - xMin);
  const xMax = Math.ceil(Math.max(...xs, xMin + 1) / xStep) * xStep;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${WIDTH}" height="${height}" viewBox="0 0 ${WIDTH} ${height}" font-family="sans-serif" font-size="12">`,
    `<rect width="${WIDTH}" height="${height}" fill="white"/>`,
    `<text x="${WIDTH / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  series.forEach((s, i) => {
    const top = TOP + i * (PANEL + GAP);
    const ys = s.points.map(([, y]) => y);
    let yMin = Math.min(...ys, Number.POSITIVE_INFINITY);
    let yMax = Math.max(...ys, Number.NEGATIVE_INFINITY);
    if (!Number.isFinite(yMin)) [yMin, yMax] = [0, 1];
    const pad = (yMax - yMin) * 0.1 || Math.abs(yMax) * 0.1 || 1;
    const yStep = niceStep(yMax - yMin + 2 * pad);
    const lo = Math.max(0, Math.floor((yMin - pad) / yStep) * yStep);
    const hi = Math.ceil((yMax + pad) / yStep) * yStep;
    const px = (x: number) => LEFT + ((x - xMin) / (xMax - xMin)) * plotW;
    const py = (y: number) => top + PANEL - ((y - lo) / (hi - lo || 1)) * PANEL;
    out.push(
      `<text x="${LEFT}" y="${top - 8}" font-weight="bold" fill="${s.color}">${esc(`${s.label} (${s.unit})`)}</text>`,
    );
    for (let y = lo; y <= hi + yStep / 2; y += yStep) {
      out.push(
        `<line x1="${LEFT}" x2="${WIDTH - RIGHT}" y1="${py(y).toFixed(1)}" y2="${py(y).toFixed(1)}" stroke="#ddd"/>`,
        `<text x="${LEFT - 6}" y="${(py(y) + 4).toFixed(1)}" text-anchor="end" fill="#444">${fmt(y)}</text>`,
      );
    }
    for (let x = Math.ceil(xMin / xStep) * xStep; x <= xMax; x += xStep) {
      out.push(
        `<line x1="${px(x).toFixed(1)}" x2="${px(x).toFixed(1)}" y1="${top}" y2="${top + PANEL}" stroke="#eee"/>`,
        `<text x="${px(x).toFixed(1)}" y="${top + PANEL + 15}" text-anchor="middle" fill="#444">${fmt(x)}</text>`,
      );
    }
    out.push(
      `<rect x="${LEFT}" y="${top}" width="${plotW}" height="${PANEL}" fill="none" stroke="#888"/>`,
    );
    if (s.points.length > 0) {
      const path = s.points.map(([x, y]) => `${px(x).toFixed(1)},${py(y).toFixed(1)}`).join(' ');
      out.push(
        `<polyline points="${path}" fill="none" stroke="${s.color}" stroke-width="2"/>`,
        ...s.points.map(
          ([x, y]) =>
            `<circle cx="${px(x).toFixed(1)}" cy="${py(y).toFixed(1)}" r="2.5" fill="${s.color}"/>`,
        ),
      );
    }
    if (i === series.length - 1) {
      out.push(
        `<text x="${LEFT + plotW / 2}" y="${top + PANEL + 32}" text-anchor="middle">${esc(xLabel)}</text>`,
      );
    }
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
