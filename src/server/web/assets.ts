// The web UI's one stylesheet and one script, served from /static/ (the pages' policy allows
// no inline style or script). The script only enhances: the pages work without it (times
// then show in UTC, actions go without the question, output does not grow by itself).
import { palette } from './ansi.js';

/** On a phone each table row is a card, each cell labelled with its column's name. */
const cardLabels = (body: string, names: string[]): string =>
  names.map((n, i) => `tbody.${body} td:nth-child(${i + 1})::before{content:"${n}"}`).join('\n');

export const STYLESHEET = `:root{--fg:#1d2125;--muted:#59626d;--bg:#fff;--line:#d5dae0;--panel:#f5f7f9;--accent:#0b57d0;--danger:#b3261e;--ok:#0b5a25;--warn:#6b4100}
*{box-sizing:border-box}
body{margin:0;font:1rem/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:var(--fg);background:var(--bg)}
.skip{position:absolute;left:-9999px}
.skip:focus{left:1rem;top:.5rem;z-index:2;background:var(--bg);padding:.5rem 1rem}
header.top{display:flex;flex-wrap:wrap;gap:.25rem 1.5rem;align-items:center;padding:.75rem 1rem;border-bottom:1px solid var(--line);background:var(--panel)}
header.top p,header.top nav{margin:0}
.brand{font-weight:700;font-size:1.25rem;color:var(--fg);text-decoration:none}
main,footer{max-width:80rem;margin:0 auto;padding:1rem}
footer{color:var(--muted);font-size:.875rem;border-top:1px solid var(--line)}
h1{font-size:1.5rem;margin:.5rem 0 1rem;overflow-wrap:anywhere}
h2{font-size:1.2rem;margin:1.75rem 0 .5rem}
a{color:var(--accent)}
a:focus-visible,button:focus-visible,input:focus-visible,pre:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
table{border-collapse:collapse;min-width:100%}
th,td{border-bottom:1px solid var(--line);padding:.5rem .6rem;text-align:left;vertical-align:top}
th{font-size:.875rem;color:var(--muted);font-weight:600;white-space:nowrap}
td{overflow-wrap:break-word}
button{font:inherit;min-height:2.75rem;padding:.5rem 1rem;border-radius:.4rem;border:1px solid var(--accent);background:var(--accent);color:#fff;cursor:pointer}
button.danger{background:var(--danger);border-color:var(--danger)}
button[value=cancel]{background:var(--bg);color:var(--fg);border-color:var(--muted)}
.badge,.status{display:inline-block;padding:.05rem .5rem;border-radius:.3rem;font-size:.875rem;font-weight:600;background:#e9edf1}
.serving,.s-success{background:#d3efda;color:var(--ok)}
.draining,.s-interrupted{background:#ffe3ad;color:var(--warn)}
.s-failure,.s-error{background:#fadad7;color:#8c1d18}
.s-running{background:#dae6ff;color:#0842a0}
.replica{color:var(--muted)}
.notice{padding:.75rem 1rem;background:#d3efda;color:var(--ok);border-radius:.4rem;font-weight:600}
.apply-lock.locked{border-left:4px solid var(--danger);padding-left:1rem}
.facts{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1.25rem;margin:0 0 1.25rem}
.facts dt{font-weight:600}
.facts dd{margin:0;overflow-wrap:anywhere}
.key{overflow-wrap:anywhere}
.job-state{display:flex;gap:.6rem;align-items:center;margin:0 0 .75rem}
.job-state span{font-weight:600}
#status{margin:0;padding:.05rem .5rem;border-radius:.3rem;font-size:.875rem;font-weight:600;background:#e9edf1}
.job-state[data-status=running] #status{background:#dae6ff;color:#0842a0}
.job-state[data-status=success] #status{background:#d3efda;color:var(--ok)}
.job-state[data-status=failure] #status,.job-state[data-status=error] #status{background:#fadad7;color:#8c1d18}
.job-state[data-status=interrupted] #status{background:#ffe3ad;color:var(--warn)}
.term{background:#16181b;color:#d0d0d0;padding:1rem;overflow:auto;max-height:75vh;border-radius:.4rem}
.term pre{margin:0;white-space:pre-wrap;overflow-wrap:anywhere;font:.875rem/1.45 ui-monospace,"DejaVu Sans Mono",monospace}
.vh{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%);white-space:nowrap}
dialog{border:1px solid var(--line);border-radius:.5rem;padding:1.25rem;max-width:min(32rem,calc(100vw - 2rem))}
dialog::backdrop{background:rgba(0,0,0,.45)}
dialog p{margin-top:0;font-weight:600}
.actions{display:flex;gap:.75rem;flex-wrap:wrap}
main form{margin:0 0 1rem}
@media (max-width:40rem){
main,footer{padding:.75rem}
.facts{grid-template-columns:1fr;gap:0}
.facts dd{margin-bottom:.6rem}
thead{position:absolute;width:1px;height:1px;overflow:hidden;clip-path:inset(50%)}
table,tbody,tr,td{display:block;width:100%;min-width:0}
tr{border:1px solid var(--line);border-radius:.4rem;margin:0 0 .75rem;padding:.4rem .75rem}
td{border:0;padding:.15rem 0;display:flex;gap:.75rem}
td:empty{display:none}
td::before{flex:none;width:7.5rem;font-weight:600;color:var(--muted)}
td[colspan]::before{content:none!important}
${cardLabels('locks', ['Repository', 'Dir', 'Workspace', 'Locked by', 'Since', 'Status'])}
${cardLabels('jobs', ['Command', 'Pull request', 'Project', 'Dir', 'Workspace', 'Started', 'Status'])}
}
${palette('.term')}
`;

export const SCRIPT = `'use strict';
(function () {
  // Times in the viewer's own timezone (the page says UTC).
  var fmt = new Intl.DateTimeFormat(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit', timeZoneName: 'short' });
  function localise(root) {
    root.querySelectorAll('time[datetime]').forEach(function (t) {
      var d = new Date(t.getAttribute('datetime'));
      if (isNaN(d.getTime()) || t.dataset.local) return;
      t.title = t.textContent;
      t.textContent = fmt.format(d);
      t.dataset.local = '1';
    });
  }
  localise(document);

  // An action is asked about first, in a modal dialog (Escape or Cancel: nothing happens).
  var dialog = document.getElementById('confirm');
  document.querySelectorAll('form[data-confirm]').forEach(function (form) {
    form.addEventListener('submit', function (e) {
      if (!dialog || typeof dialog.showModal !== 'function') return;
      e.preventDefault();
      document.getElementById('confirm-text').textContent = form.dataset.confirm;
      dialog.returnValue = '';
      dialog.onclose = function () { if (dialog.returnValue === 'yes') form.submit(); };
      dialog.showModal();
    });
  });

  // A running job's output grows as terraform writes it (HTML made by the server, ansi.ts).
  var term = document.getElementById('term');
  var out = document.getElementById('out');
  if (!term || !out || !term.dataset.stream || typeof EventSource !== 'function') return;
  var follow = document.getElementById('follow');
  var status = document.getElementById('status');
  function keepInView() { if (!follow || follow.checked) term.scrollTop = term.scrollHeight; }
  keepInView();
  var es = new EventSource(term.dataset.stream);
  es.addEventListener('html', function (e) { out.insertAdjacentHTML('beforeend', JSON.parse(e.data)); keepInView(); });
  es.addEventListener('done', function (e) {
    es.close();
    var result = JSON.parse(e.data);
    if (status) {
      status.textContent = result;
      status.parentNode.dataset.status = result;
    }
    out.dataset.done = result;
  });
})();
`;
