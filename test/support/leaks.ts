// Where a secret shows in a text, in any form an attacker may print it in: verbatim,
// URL-encoded, or base64 at any alignment in either alphabet (line breaks removed).

/** Every base64 decoding of `text`'s base64-looking runs, at every start. */
export function base64Decodings(text: string): string[] {
  const out: string[] = [];
  for (const run of text.match(/[A-Za-z0-9+/_=\r\n-]{16,}/g) ?? []) {
    const flat = run.replace(/[\r\n=]/g, '');
    for (let start = 0; start < 4; start++) {
      out.push(
        Buffer.from(flat.slice(start), 'base64').toString('latin1'),
        Buffer.from(flat.slice(start).replace(/-/g, '+').replace(/_/g, '/'), 'base64').toString('latin1'),
      );
    }
  }
  return out;
}

/** How `secret` shows in `text`; undefined if nowhere. */
export function leak(text: string, secret: string): string | undefined {
  if (text.includes(secret)) return 'verbatim';
  if (text.toLowerCase().includes(encodeURIComponent(secret).toLowerCase())) return 'URL-encoded';
  if (base64Decodings(text).some((d) => d.includes(secret))) return 'base64';
  return undefined;
}
