// What every page of the web UI shares: escaping (every text is scrubbed of the server's
// secrets first), <time> elements the browser shows in the viewer's timezone, the document
// around a page's main part, and the headers every page is sent with. Pure.
import { processRedactor } from '../secrets/redact.js';

const ENTITIES: Readonly<Record<string, string>> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
/** Text for HTML as it is: the five characters that could start markup or end an attribute become entities. */
export const escapeText = (s: string): string => s.replace(/[&<>"']/g, (c) => ENTITIES[c] ?? c);
/** Text for HTML: secrets scrubbed, then escaped. */
export const esc = (s: unknown): string => escapeText(processRedactor.redact(String(s)));

/** `2026-12-01 10:00:00 UTC`: what a page shows before its script puts the time in the viewer's zone. */
export function utcText(iso: string): string {
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : `${d.toISOString().slice(0, 19).replace('T', ' ')} UTC`;
}

/** A time the page's script shows in the viewer's timezone (atlantis.js); UTC without the script. */
export function timeTag(iso: string | Date): string {
  const s = typeof iso === 'string' ? iso : iso.toISOString();
  return `<time datetime="${esc(s)}">${esc(utcText(s))}</time>`;
}

/**
 * Sent with every page. The policy lets a page load only this server's own script and styles
 * (no inline script or style, so an escaping mistake cannot run code), post forms only here,
 * and be framed by no one (a framed page could be clicked on from another site).
 */
export const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'content-security-policy':
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'same-origin',
  'cache-control': 'no-store',
};

export interface LayoutOptions {
  title: string;
  /** The page's main part, HTML. */
  main: string;
  /** The line under the name: this server's state (index) or a way back (other pages). */
  header?: string;
  footer: string;
}

/** The whole document: language, viewport, styles and script, a skip link, one <main>, the confirmation dialog. */
export function layout(o: LayoutOptions): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${esc(o.title)}</title>
<link rel="icon" href="data:,">
<link rel="stylesheet" href="/static/atlantis.css">
<script src="/static/atlantis.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top"><a class="brand" href="/">atlantis</a>${o.header ?? ''}</header>
<main id="main">
${o.main}
</main>
<footer>${o.footer}</footer>
<dialog id="confirm" aria-labelledby="confirm-text"><form method="dialog"><p id="confirm-text"></p>
<div class="actions"><button value="yes" class="danger">Yes</button> <button value="cancel" autofocus>Cancel</button></div></form></dialog>
</body>
</html>
`;
}
