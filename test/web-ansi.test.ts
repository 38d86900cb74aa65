// The ANSI colour converter of job output (src/server/web/ansi.ts): SGR escapes
// become classes on spans, every other escape is dropped, text is always escaped, colours and
// a cut escape carry over from one chunk to the next, and 24-bit colours go to the nearest of 256.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { AnsiHtml, ansiToHtml, applySgr, colourOf, nearest256, palette } from '../src/server/web/ansi.js';

const E = '\x1b';

describe('ANSI to HTML', () => {
  const rows: Array<[string, string, string]> = [
    ['plain text', 'Plan: 1 to add', 'Plan: 1 to add'],
    ['markup is escaped', '<script>alert("x")</script> & \'q\'', '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;q&#39;'],
    ['a colour and its reset', `${E}[32m+ create${E}[0m done`, '<span class="xf2">+ create</span> done'],
    ['bold and colour together', `${E}[1;31mError:${E}[0m`, '<span class="xf1 xb">Error:</span>'],
    ['an empty SGR resets', `${E}[33mwarn${E}[m ok`, '<span class="xf3">warn</span> ok'],
    ['bright foreground and background', `${E}[92;104mx`, '<span class="xf10 xg12">x</span>'],
    ['256 colours', `${E}[38;5;208morange`, '<span class="xf208">orange</span>'],
    ['24-bit colour goes to the nearest of 256', `${E}[38;2;255;0;0mred`, '<span class="xf196">red</span>'],
    ['24-bit colon form', `${E}[48:2::0:0:255mblue`, '<span class="xg21">blue</span>'],
    ['default colour 39 keeps bold', `${E}[1;34mx${E}[39my`, '<span class="xf4 xb">x</span><span class="xb">y</span>'],
    ['22 ends bold and dim', `${E}[1;2ma${E}[22mb`, '<span class="xb xd">a</span>b'],
    ['italic, underline and their ends', `${E}[3;4ma${E}[23;24mb`, '<span class="xi xu">a</span>b'],
    ['inverse swaps the colours', `${E}[31;42;7mx`, '<span class="xv xf2 xg1">x</span>'],
    ['cursor moves and erases are dropped', `a${E}[2K${E}[1Gb${E}[?25l`, 'ab'],
    ['a window title (OSC) is dropped', `${E}]0;title${String.fromCharCode(7)}text`, 'text'],
    ['a character set choice is dropped', `${E}(B${E}[mtext`, 'text'],
    ['carriage returns and other controls are dropped; tabs and newlines stay', 'a\r\n\tb\x07\x08\x7fc', 'a\n\tbc'],
    ['an escaped SGR cannot open markup', `${E}[31m<b>${E}[0m`, '<span class="xf1">&lt;b&gt;</span>'],
    ['a lone ESC before text is dropped', `${E}!x`, '!x'],
    ['unknown SGR numbers are ignored', `${E}[5;31;53mx`, '<span class="xf1">x</span>'],
  ];
  for (const [what, input, html] of rows) it(what, () => assert.equal(ansiToHtml(input), html));

  it('colours carry over from one chunk to the next, each chunk balanced', () => {
    const a = new AnsiHtml();
    assert.equal(a.push(`${E}[32mfirst `), '<span class="xf2">first </span>');
    assert.equal(a.push('second'), '<span class="xf2">second</span>');
    assert.equal(a.push(`${E}[0m third`), ' third');
  });

  it('an escape cut between chunks is held back, then applied', () => {
    const a = new AnsiHtml();
    assert.equal(a.push(`ok ${E}[3`), 'ok ');
    assert.equal(a.held, `${E}[3`);
    assert.equal(a.push('1mred'), '<span class="xf1">red</span>');
    assert.equal(a.held, '');
    assert.equal(a.push(E), '');
    assert.equal(a.push('[0mplain'), 'plain');
  });

  it('an overlong would-be escape is not held forever', () => {
    const a = new AnsiHtml();
    const long = `${E}[${'1;'.repeat(200)}`;
    assert.equal(a.push(long), `[${'1;'.repeat(200)}`);
    assert.equal(a.held, '');
  });

  it('SGR parameters: reset clears everything', () => {
    assert.deepEqual(applySgr({ fg: 1, bold: true, underline: true }, '0'), {});
    assert.deepEqual(applySgr({}, '38;5'), {}, 'a colour without its number');
    assert.deepEqual(applySgr({}, '38;5;300'), {}, 'out of range');
  });

  it('the 256-colour table: basic, cube and grey ramp; nearest picks each back', () => {
    assert.equal(colourOf(16), '#000000');
    assert.equal(colourOf(196), '#ff0000');
    assert.equal(colourOf(231), '#ffffff');
    assert.equal(colourOf(232), '#080808');
    assert.equal(colourOf(255), '#eeeeee');
    for (const n of [16, 21, 46, 196, 208, 226, 231, 232, 244, 255]) {
      const hex = colourOf(n);
      const [r, g, b] = [1, 3, 5].map((i) => Number.parseInt(hex.slice(i, i + 2), 16)) as [number, number, number];
      const back = nearest256(r, g, b);
      assert.equal(colourOf(back), hex, `${n} ${hex} -> ${back}`);
    }
  });

  it('the palette has a rule for every class it can give', () => {
    const css = palette('.term');
    for (const n of [0, 15, 16, 255]) {
      assert.ok(css.includes(`.term .xf${n}{color:`), `xf${n}`);
      assert.ok(css.includes(`.term .xg${n}{background:`), `xg${n}`);
    }
    for (const c of ['xv', 'xb', 'xd', 'xi', 'xu']) assert.ok(css.includes(`.term .${c}{`), c);
  });
});
