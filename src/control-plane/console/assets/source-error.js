import { html } from '/console/vendor/preact-htm.js';

// An error in text the user typed (a filter, a Traffic Policy), shown where it is: the error's
// code and message, then the line it is on with a caret under its column.

/** The line, and under it a caret at `column` (1-based). */
function caret(line, column) {
  return `${line}\n${' '.repeat(Math.max(0, column - 1))}^`;
}

/**
 * `error` is an ApiError; `at` its {line, column} in `text` when known (column may be absent:
 * then the line is shown without a caret).
 */
export function SourceError({ error, text, at, className }) {
  const line = at ? text.split('\n')[at.line - 1] : undefined;
  const where = at && (at.column ? `line ${at.line}, column ${at.column}` : `line ${at.line}`);
  return html`<div class=${className} role="alert">
    <p>
      <strong>${error.body?.error_code ?? 'error'}</strong>
      ${where && html` at ${where}`}: ${error.message}
    </p>
    ${
      line !== undefined &&
      html`<pre class="caret">${at.column ? caret(line, at.column) : line}</pre>`
    }
  </div>`;
}
