// req.user_agent.*: a small reading of the User-Agent field, enough for the rules people write
// (bots, mobiles, the browser's name): the product tokens browsers send, in the order that
// tells them apart (Edge and Chrome both say Chrome; Chrome and Safari both say Safari).

const BROWSERS: readonly [string, RegExp][] = [
  ['Edge', /Edg(?:e|A|iOS)?\/([\d.]+)/],
  ['Opera', /OPR\/([\d.]+)/],
  ['Firefox', /Firefox\/([\d.]+)/],
  ['Chrome', /Chrome\/([\d.]+)/],
  ['Safari', /Version\/([\d.]+).*Safari\//],
  ['curl', /^curl\/([\d.]+)/],
];

const SYSTEMS: readonly [string, RegExp][] = [
  ['Android', /Android/],
  ['iOS', /iPhone|iPad|iPod/],
  ['Windows', /Windows/],
  ['macOS', /Mac OS X|Macintosh/],
  ['Linux', /Linux/],
];

const BOT = /bot|crawl|spider|slurp|facebookexternalhit|headless/i;
/** iPads, Android devices that do not say Mobile, and anything that says Tablet. */
const TABLET = /iPad|Tablet|Android(?!.*Mobi)/;
const MOBILE = /Mobi|Android|iPhone/;

/** The `req.user_agent` group of a User-Agent value. */
export function userAgentValues(ua: string) {
  let name = '';
  let version = '';
  for (const [n, re] of BROWSERS) {
    const m = re.exec(ua);
    if (m) {
      name = n;
      version = m[1];
      break;
    }
  }
  const os = SYSTEMS.find(([, re]) => re.test(ua))?.[0] ?? '';
  const isBot = BOT.test(ua);
  const isTablet = TABLET.test(ua);
  const isMobile = !isTablet && MOBILE.test(ua);
  return {
    _string: ua,
    name,
    version,
    os,
    is_bot: isBot,
    is_mobile: isMobile,
    is_tablet: isTablet,
    // A browser on a desktop system: neither a phone, a tablet nor a bot.
    is_desktop: !isBot && !isMobile && !isTablet && ['Windows', 'macOS', 'Linux'].includes(os),
  };
}
