// The status page's stylesheet: readable at 1280 px and on a phone (tables become labelled cards
// below 760 px), results told apart by shape and letter as well as colour, visible focus.

export const PAGE_STYLE = `
:root { color-scheme: light dark; --fg: #1f2328; --muted: #59636e; --bg: #ffffff; --panel: #f6f8fa; --line: #d1d9e0;
  --ok: #1a7f37; --fail: #cf222e; --skip: #9a6700; --run: #0969da; --pause: #8250df; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6edf3; --muted: #9198a1; --bg: #0d1117; --panel: #151b23; --line: #3d444d;
  --ok: #3fb950; --fail: #f85149; --skip: #d29922; --run: #4493f8; --pause: #ab7df8; } }
* { box-sizing: border-box; }
body { margin: 0; font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Liberation Sans", sans-serif; color: var(--fg); background: var(--bg); }
.wrap { max-width: 1280px; margin: 0 auto; padding: 0 16px; }
header { border-bottom: 1px solid var(--line); background: var(--panel); }
header .wrap { display: flex; flex-wrap: wrap; gap: 4px 24px; align-items: baseline; padding-top: 10px; padding-bottom: 10px; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 17px; margin: 24px 0 8px; }
nav ul { display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; margin: 0; padding: 0; }
a { color: var(--run); }
a:focus-visible, button:focus-visible, [tabindex]:focus-visible { outline: 3px solid var(--run); outline-offset: 2px; }
#status p { margin: 8px 0 0; }
.muted, .sub { color: var(--muted); }
.sub { display: block; font-size: 13px; }
code { font: 13px/1.3 ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; }
.controls { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; margin-top: 8px; }
button { font: inherit; padding: 4px 12px; border: 1px solid var(--line); border-radius: 6px; background: var(--bg); color: var(--fg); cursor: pointer; }
button[aria-pressed="true"] { background: var(--panel); font-weight: 600; }
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; margin: 0; padding: 0; list-style: none; font-size: 13px; }
.legend li { display: flex; align-items: center; gap: 6px; }
.table-wrap { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; vertical-align: top; padding: 8px 10px; border-bottom: 1px solid var(--line); }
thead th { font-size: 13px; color: var(--muted); font-weight: 600; white-space: nowrap; }
tbody th { font-weight: 600; }
.id { font-weight: 600; }
.num { white-space: nowrap; font-variant-numeric: tabular-nums; }
.reason { color: var(--muted); }
/* two rows of 15, newest last: fits beside the other columns at 1280 px and on a phone */
.strip { display: flex; flex-wrap: wrap; gap: 2px; margin: 0; padding: 0; list-style: none; width: calc(15 * 17px); }
.r { flex: none; width: 15px; height: 15px; display: inline-flex; align-items: center; justify-content: center;
  font: 700 10px/1 ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; }
time { white-space: nowrap; }
.r-success { background: var(--ok); color: #fff; border-radius: 50%; }
.r-failure { background: var(--fail); color: #fff; border-radius: 1px; }
.r-skipped { background: transparent; color: var(--skip); border: 2px dashed var(--skip); border-radius: 1px; }
.r-unknown { border: 1px solid var(--muted); color: var(--muted); }
.badge { display: inline-block; padding: 0 7px; border-radius: 10px; font-size: 13px; font-weight: 600; border: 1px solid currentColor; white-space: nowrap; }
.badge.b-paused { white-space: normal; overflow-wrap: anywhere; max-width: 32ch; }
.b-success { color: var(--ok); } .b-failure { color: var(--fail); } .b-skipped, .b-starved { color: var(--skip); }
.b-starved { border-style: dashed; } .b-running { color: var(--run); } .b-paused { color: var(--pause); } .b-queued { color: var(--run); border-style: dotted; } .b-waiting { color: var(--skip); border-style: dotted; } .b-muted { color: var(--muted); }
.health.bad { font-weight: 600; }
dl.lock { display: grid; grid-template-columns: repeat(auto-fill, minmax(190px, 1fr)); gap: 8px 24px; margin: 0; }
dl.lock dt { font-size: 13px; color: var(--muted); }
dl.lock dd { margin: 0; }
pre.output { margin: 0; padding: 10px 12px; max-height: 60vh; overflow: auto; background: var(--panel); border: 1px solid var(--line); border-radius: 6px;
  font: 13px/1.4 ui-monospace, "DejaVu Sans Mono", "Liberation Mono", monospace; white-space: pre-wrap; overflow-wrap: anywhere; }
input { font: inherit; padding: 3px 8px; border: 1px solid var(--muted); border-radius: 6px; background: var(--bg); color: var(--fg); max-width: 100%; }
input:focus-visible { outline: 3px solid var(--run); outline-offset: 2px; }
form.token { margin-top: 12px; padding: 10px 12px; border: 1px solid var(--line); border-radius: 6px; background: var(--panel); }
form.token p { margin: 0 0 6px; font-weight: 600; }
#action-result:empty, #token-says:empty { display: none; }
#notice:empty { display: none; }
#snapshot { border-left: 4px solid var(--fail); padding: 0.25rem 0.75rem; }
.chart { display: block; margin: 0.25rem 0; }
.bar-success { fill: var(--ok); } .bar-failure { fill: var(--fail); } .bar-unknown { fill: var(--skip); }
.pager { margin: 0.5rem 0; display: flex; gap: 1rem; flex-wrap: wrap; }
#notice { color: var(--fail); font-weight: 600; }
footer { margin-top: 32px; padding-bottom: 24px; font-size: 13px; color: var(--muted); }
#skip:focus { position: static; width: auto; height: auto; margin: 8px 16px; clip: auto; display: inline-block; }
.visually-hidden { position: absolute; width: 1px; height: 1px; margin: -1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; border: 0; }
@media (max-width: 760px) {
  table, thead, tbody, tr, th, td { display: block; }
  thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); }
  tbody tr { border: 1px solid var(--line); border-radius: 8px; margin: 0 0 12px; padding: 4px 0; }
  tbody th, tbody td { border: 0; padding: 4px 12px; }
  tbody td[data-label]::before { content: attr(data-label); display: block; font-size: 12px; color: var(--muted); }
}
`;
