// Terminal colours in job output (ANSI SGR escapes: terraform runs with -no-color, but what a
// provisioner, a custom `run` step or a hook runs prints its own) shown as coloured text: each escape becomes a class on a
// <span>, every other escape (cursor moves, titles) is dropped, and the text is escaped, so
// output can never become markup. The page's policy allows no inline style, hence classes
// for all 256 colours (24-bit colours go to the nearest of them); palette() gives their CSS.
// Pure; one converter per output, since colours and a cut escape carry over from one chunk to
// the next. It only escapes: callers scrub the server's secrets from the text first.
import { escapeText } from './html.js';

interface Style {
  fg?: number;
  bg?: number;
  bold?: boolean;
  dim?: boolean;
  italic?: boolean;
  underline?: boolean;
  inverse?: boolean;
}

/** A CSI sequence (`ESC [ params intermediates final`), an OSC one (ended by BEL or `ESC \`), a character set choice (`ESC ( B`), or a two-character escape. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: escapes are what this matches
const ESCAPE = /\x1b(?:\[([0-?]*)[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)|[()*+#%][ -~]|[0-?@-Z\\-_])/y;
/** The start of an escape cut at the end of a chunk: kept for the next one. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: escapes are what this matches
const CUT = /\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*\x1b?|[()*+#%])?$/y;
/** Every control character but tab and newline (ESC among them), and DEL. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this matches
const SPECIAL = /[\x00-\x08\x0b-\x1f\x7f]/g;
/** An escape longer than this is no escape: its ESC is dropped and the rest shown. */
const MAX_ESCAPE = 256;

export class AnsiHtml {
  private style: Style = {};
  private cut = '';

  /** HTML of `text`, its spans closed at its end (and reopened by the next push while the colours last). */
  push(text: string): string {
    const s = this.cut + text;
    this.cut = '';
    let out = '';
    let run = '';
    const flush = () => {
      if (run === '') return;
      const cls = classesOf(this.style);
      out += cls === '' ? escapeText(run) : `<span class="${cls}">${escapeText(run)}</span>`;
      run = '';
    };
    let i = 0;
    while (i < s.length) {
      // Text up to the next escape or control character goes as it is (escaped in flush).
      SPECIAL.lastIndex = i;
      const next = SPECIAL.exec(s);
      const j = next ? next.index : s.length;
      if (j > i) run += s.slice(i, j);
      if (!next) break;
      i = j;
      if (s.charCodeAt(i) !== 0x1b) {
        // A carriage return, a bell, a backspace: dropped.
        i++;
        continue;
      }
      ESCAPE.lastIndex = i;
      const m = ESCAPE.exec(s);
      if (m) {
        if (m[2] === 'm') {
          flush();
          this.style = applySgr(this.style, m[1] ?? '');
        }
        i = ESCAPE.lastIndex;
        continue;
      }
      CUT.lastIndex = i;
      if (s.length - i <= MAX_ESCAPE && CUT.test(s)) {
        this.cut = s.slice(i);
        break;
      }
      i++;
    }
    flush();
    return out;
  }

  /** Characters of the last push held back as the start of a cut escape (not shown yet). */
  get held(): string {
    return this.cut;
  }
}

/** The whole of one text. */
export const ansiToHtml = (text: string): string => new AnsiHtml().push(text);

function classesOf(st: Style): string {
  const cls: string[] = [];
  let { fg, bg } = st;
  if (st.inverse) {
    [fg, bg] = [bg, fg];
    cls.push('xv');
  }
  if (fg !== undefined) cls.push(`xf${fg}`);
  if (bg !== undefined) cls.push(`xg${bg}`);
  if (st.bold) cls.push('xb');
  if (st.dim) cls.push('xd');
  if (st.italic) cls.push('xi');
  if (st.underline) cls.push('xu');
  return cls.join(' ');
}

/** The style after one SGR sequence's parameters (`1;31`, `38;5;208`, `38;2;255;0;0`, `38:2::255:0:0`, empty = reset). */
export function applySgr(prev: Style, params: string): Style {
  const num = (x: string | undefined) => (x === undefined || x === '' ? 0 : Number(x));
  const groups = params === '' ? ['0'] : params.split(';');
  const st: Style = { ...prev };
  for (let i = 0; i < groups.length; i++) {
    const [head, ...sub] = (groups[i] ?? '').split(':');
    const n = num(head);
    if (n === 38 || n === 48) {
      // Colon form: all in this group (`38:5:n`, `38:2:[space]:r:g:b`); else the next groups.
      const rest = sub.length > 0 ? sub.map(num) : groups.slice(i + 1).map(num);
      const [colour, used] = extendedColour(rest, sub.length > 0);
      if (sub.length === 0) i += used;
      if (colour !== undefined) st[n === 38 ? 'fg' : 'bg'] = colour;
    } else basicSgr(st, n);
  }
  for (const k of Object.keys(st)) if (st[k as keyof Style] === undefined) delete st[k as keyof Style];
  return st;
}

function basicSgr(st: Style, n: number): void {
  if (n === 0) for (const k of Object.keys(st)) delete st[k as keyof Style];
  else if (n === 1) st.bold = true;
  else if (n === 2) st.dim = true;
  else if (n === 3) st.italic = true;
  else if (n === 4) st.underline = true;
  else if (n === 7) st.inverse = true;
  else if (n === 22) Object.assign(st, { bold: undefined, dim: undefined });
  else if (n === 23) st.italic = undefined;
  else if (n === 24) st.underline = undefined;
  else if (n === 27) st.inverse = undefined;
  else if (n >= 30 && n <= 37) st.fg = n - 30;
  else if (n >= 90 && n <= 97) st.fg = n - 90 + 8;
  else if (n === 39) st.fg = undefined;
  else if (n >= 40 && n <= 47) st.bg = n - 40;
  else if (n >= 100 && n <= 107) st.bg = n - 100 + 8;
  else if (n === 49) st.bg = undefined;
}

/** `5;n` or `2;r;g;b` after a 38/48: the colour (0-255) and how many parameters it took. */
function extendedColour(p: number[], colon: boolean): [number | undefined, number] {
  const byte = (v: number | undefined) => (v !== undefined && Number.isInteger(v) && v >= 0 && v <= 255 ? v : undefined);
  if (p[0] === 5) return [byte(p[1]), 2];
  if (p[0] === 2) {
    // The colon form may carry a colour space first (`2:space:r:g:b`): the last three are the colour.
    const rgb = colon && p.length >= 5 ? p.slice(-3) : p.slice(1, 4);
    const [r, g, b] = [byte(rgb[0]), byte(rgb[1]), byte(rgb[2])];
    return [r === undefined || g === undefined || b === undefined ? undefined : nearest256(r, g, b), 4];
  }
  return [undefined, 0];
}

const LEVELS = [0, 95, 135, 175, 215, 255];
const level = (v: number): number => LEVELS.reduce((best, l, i) => (Math.abs(l - v) < Math.abs((LEVELS[best] ?? 0) - v) ? i : best), 0);

/** The 256-colour index nearest to a 24-bit colour: the 6x6x6 cube or the grey ramp. */
export function nearest256(r: number, g: number, b: number): number {
  const [ri, gi, bi] = [level(r), level(g), level(b)];
  const cube = 16 + 36 * ri + 6 * gi + bi;
  const grey = Math.min(23, Math.max(0, Math.round(((r + g + b) / 3 - 8) / 10)));
  const dist = (x: number, y: number, z: number) => (x - r) ** 2 + (y - g) ** 2 + (z - b) ** 2;
  const cubeDist = dist(LEVELS[ri] ?? 0, LEVELS[gi] ?? 0, LEVELS[bi] ?? 0);
  const g8 = 8 + grey * 10;
  return dist(g8, g8, g8) < cubeDist ? 232 + grey : cube;
}

/** The 16 basic colours, readable on the dark background of the output. */
const BASIC = [
  '#3b3b3b',
  '#ff6b6b',
  '#5fd35f',
  '#e5c15b',
  '#6fa8ff',
  '#d68aff',
  '#4fd1d9',
  '#d0d0d0',
  '#808080',
  '#ff8f8f',
  '#8cf08c',
  '#ffe27a',
  '#9cc4ff',
  '#e6b0ff',
  '#7ae8ee',
  '#ffffff',
];

/** The colour of index n (0-255) as #rrggbb. */
export function colourOf(n: number): string {
  if (n < 16) return BASIC[n] ?? '#d0d0d0';
  const hex = (v: number) => v.toString(16).padStart(2, '0');
  if (n >= 232) {
    const v = 8 + (n - 232) * 10;
    return `#${hex(v)}${hex(v)}${hex(v)}`;
  }
  const i = n - 16;
  return `#${hex(LEVELS[Math.floor(i / 36)] ?? 0)}${hex(LEVELS[Math.floor(i / 6) % 6] ?? 0)}${hex(LEVELS[i % 6] ?? 0)}`;
}

/** The CSS of every class push() uses, for rules under `scope` (the output's element). */
export function palette(scope: string): string {
  const rules = [`${scope} .xv{color:#111;background:#d0d0d0}`];
  for (let n = 0; n < 256; n++) rules.push(`${scope} .xf${n}{color:${colourOf(n)}}`, `${scope} .xg${n}{background:${colourOf(n)}}`);
  rules.push(
    `${scope} .xb{font-weight:bold}`,
    `${scope} .xd{opacity:.7}`,
    `${scope} .xi{font-style:italic}`,
    `${scope} .xu{text-decoration:underline}`,
  );
  return rules.join('\n');
}
