/**
 * The live page `--metrics` serves at `/`: the fleet model (./fleetModel.ts)
 * as HTML. The server renders the sections here and pushes them over
 * server-sent events; the page's script only swaps them in, so what a
 * browser shows is exactly what these functions return and the tests can
 * check them without a browser. Every text that comes from a user (service,
 * host, instance and load balancer names, versions, reasons) goes through
 * escapeHtml; colours are computed here, never taken from input.
 *
 * PURE: the caller passes `nowMs`.
 */
import { PHASES, type FleetModel, type InstanceView } from './fleetModel.js';

export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
}

/** Colours far apart, and readable with white text, for the first revisions a page sees. */
const PALETTE = ['#1f6feb', '#d9480f', '#2b8a3e', '#ae3ec9', '#0b7285', '#c92a2a', '#5f3dc4', '#8f5b00'];

/** A revision's colour: by the order the model saw revisions (old blue, new orange); past the palette, a hue from its name. */
export function colourOf(m: FleetModel, key: string): string {
  const at = m.revisions.indexOf(key);
  if (at >= 0 && at < PALETTE.length) return PALETTE[at]!;
  let h = 2166136261;
  for (let i = 0; i < key.length; i++) h = Math.imul(h ^ key.charCodeAt(i), 16777619);
  return `hsl(${(h >>> 0) % 360} 65% 40%)`;
}

const short = (rev: string) => (rev.length > 12 ? rev.slice(0, 7) : rev);
const ago = (ms: number) =>
  ms < 1000 ? 'now' : ms < 60_000 ? `${Math.floor(ms / 1000)} s` : ms < 3_600_000 ? `${Math.floor(ms / 60_000)} min` : `${Math.floor(ms / 3_600_000)} h`;

function revisionChip(m: FleetModel, rev: string): string {
  const version = m.versions[rev];
  const label = version !== undefined ? `${version} · ${short(rev)}` : short(rev) || '?';
  return `<span class="rev" style="--c:${colourOf(m, rev)}" title="revision ${escapeHtml(rev)}">${escapeHtml(label)}</span>`;
}

function rolloutSection(m: FleetModel, nowMs: number): string {
  const r = m.rollout;
  if (!r) {
    const last = m.lastRollout;
    if (!last) return '<h2>Rollout</h2><p class="quiet">no rollout in progress</p>';
    const took = last.endedMs !== undefined ? ` in ${((last.endedMs - last.startedMs) / 1000).toFixed(1)} s` : '';
    return `<h2>Rollout</h2><p><span class="outcome ${escapeHtml(last.outcome ?? '')}">${escapeHtml(last.outcome ?? 'ended')}</span> ${escapeHtml(last.strategy)}${last.target ? ` to ${revisionChip(m, last.target)}` : ''}${escapeHtml(took)}, ${escapeHtml(ago(nowMs - (last.endedMs ?? nowMs)))} ago</p>`;
  }
  const rows: [string, string][] = [
    ['strategy', escapeHtml(r.strategy)],
    ['target', r.target ? revisionChip(m, r.target) : escapeHtml(r.version ?? 'preflight')],
    ['running for', escapeHtml(ago(nowMs - r.startedMs))],
  ];
  if (r.wave !== undefined) rows.push(['wave', String(r.wave)]);
  if (r.canary) {
    const c = r.canary;
    const bar = `<span class="weight"><span style="width:${Math.max(0, Math.min(100, c.weight))}%"></span></span>`;
    rows.push(['canary', `step ${c.index} (${escapeHtml(c.kind)}${c.held ? ', held' : ''}${c.done ? ', done' : ''}) ${bar} ${c.weight}% to the new revision`]);
  }
  if (r.note) rows.push(['now', escapeHtml(r.note)]);
  return `<h2>Rollout <span class="live">in progress</span></h2><table class="kv">${rows.map(([k, v]) => `<tr><th>${k}</th><td>${v}</td></tr>`).join('')}</table>`;
}

function hostsSection(m: FleetModel, nowMs: number): string {
  const byHost = new Map<string, InstanceView[]>();
  for (const i of Object.values(m.instances)) byHost.set(i.host, [...(byHost.get(i.host) ?? []), i]);
  if (byHost.size === 0) return '<h2>Instances</h2><p class="quiet">no instance seen yet</p>';
  const order = (i: InstanceView) => PHASES.indexOf(i.phase);
  const tables = [...byHost.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([host, list]) => {
      const rows = list
        .sort((a, b) => order(a) - order(b) || (a.name < b.name ? -1 : 1))
        .map(
          (i) =>
            `<tr style="--c:${colourOf(m, i.revision)}"><td class="name">${escapeHtml(i.name)}</td><td>${revisionChip(m, i.revision)}</td><td><span class="phase ${i.phase}">${i.phase}</span></td><td class="addr">${escapeHtml(i.address ?? '')}</td><td class="since">${escapeHtml(ago(nowMs - i.sinceMs))}</td></tr>`,
        )
        .join('');
      return `<div class="host"><h3>host ${escapeHtml(host)} <span class="quiet">${list.length} instance(s)</span></h3><table><thead><tr><th>instance</th><th>revision</th><th>phase</th><th>address</th><th>for</th></tr></thead><tbody>${rows}</tbody></table></div>`;
    });
  // At a glance, before the tables: how many of each revision there are, fleet-wide.
  const perRevision = new Map<string, number>();
  for (const i of Object.values(m.instances)) perRevision.set(i.revision, (perRevision.get(i.revision) ?? 0) + 1);
  const summary = [...perRevision.entries()]
    .sort(([a], [b]) => m.revisions.indexOf(a) - m.revisions.indexOf(b))
    .map(([rev, n]) => `<span class="count">${n} ×</span> ${revisionChip(m, rev)}`)
    .join(' ');
  return `<h2>Instances <span class="summary">${summary}</span></h2>${tables.join('')}`;
}

function balancersSection(m: FleetModel): string {
  const lbs = Object.entries(m.balancers);
  if (lbs.length === 0) return '<h2>Load balancers</h2><p class="quiet">no load balancer seen yet</p>';
  const items = lbs.map(([lb, servers]) => {
    const list = Object.entries(servers).sort(([a], [b]) => (a < b ? -1 : 1));
    const up = list.filter(([, s]) => s === 'up').length;
    const chips = list
      .map(([name, s]) => {
        const rev = m.instances[name]?.revision;
        return `<li class="server ${s}" style="--c:${rev ? colourOf(m, rev) : '#888'}"><span class="name">${escapeHtml(name)}</span> <span class="state">${s}</span></li>`;
      })
      .join('');
    const reloads = m.reloadFree.includes(lb) ? 'reload-free' : `${m.reloads[lb] ?? 0} reload(s)`;
    return `<div class="lb"><h3>${escapeHtml(lb)} <span class="quiet">${up} up of ${list.length}, ${reloads}</span></h3><ul>${chips || '<li class="quiet">no server</li>'}</ul></div>`;
  });
  return `<h2>Load balancers</h2>${items.join('')}`;
}

/** The answering versions per second, the last `seconds`: a stacked column per second, one colour per version. */
function versionsSection(m: FleetModel, nowMs: number, seconds = 60): string {
  const revisionOfVersion = new Map(Object.entries(m.versions).map(([rev, v]) => [v, rev] as const));
  const colour = (v: string) => colourOf(m, revisionOfVersion.get(v) ?? v);
  // The current second is still being logged and read: the strip ends before it.
  const to = Math.floor(nowMs / 1000) - 1;
  const bySec = new Map(m.traffic.map((t) => [t.sec, t]));
  const cols: Record<string, number>[] = [];
  for (let s = to - seconds; s < to; s++) cols.push(bySec.get(s)?.byVersion ?? {});
  const peak = Math.max(1, ...cols.map((c) => Object.values(c).reduce((a, b) => a + b, 0)));
  const seen = [...new Set(cols.flatMap((c) => Object.keys(c)))].sort();
  if (seen.length === 0)
    return '<h2>Answering versions per second</h2><p class="quiet">no answer with an X-App-Version in the access log yet (the last 60 s)</p>';
  const bars = cols
    .map(
      (c) =>
        `<div class="col">${Object.entries(c)
          .sort(([a], [b]) => (a < b ? -1 : 1))
          .map(([v, n]) => `<span style="height:${((n / peak) * 100).toFixed(1)}%;background:${colour(v)}" title="${escapeHtml(v)}: ${n}/s"></span>`)
          .join('')}</div>`,
    )
    .join('');
  const recent = cols.slice(-5);
  const mean = (v: string) => (recent.reduce((n, c) => n + (c[v] ?? 0), 0) / recent.length).toFixed(1);
  const legend =
    seen.map((v) => `<li><span class="dot" style="background:${colour(v)}"></span>${escapeHtml(v)} <b>${mean(v)}</b>/s</li>`).join('') +
    '<li class="quiet">(mean of the last 5 s)</li>';
  return `<h2>Answering versions per second <span class="quiet">last ${seconds} s, peak ${peak}/s</span></h2><div class="strip">${bars}</div><ul class="legend">${legend}</ul>`;
}

export type PageSections = Record<'rollout' | 'hosts' | 'balancers' | 'versions', string>;

export function renderSections(m: FleetModel, nowMs: number): PageSections {
  return { rollout: rolloutSection(m, nowMs), hosts: hostsSection(m, nowMs), balancers: balancersSection(m), versions: versionsSection(m, nowMs) };
}

const CSS = `
:root{font:14px/1.4 system-ui,sans-serif;color:#1d2329;background:#f4f5f7}
body{margin:0}header{background:#1d2329;color:#fff;padding:10px 20px;display:flex;gap:16px;align-items:baseline}
header h1{font-size:18px;margin:0}#conn{margin-left:auto;font-size:12px}#conn.on::before{content:'● ';color:#3fb950}#conn.off::before{content:'● ';color:#f85149}
main{display:grid;grid-template-columns:minmax(0,3fr) minmax(0,2fr);gap:16px;padding:16px 20px}
section{background:#fff;border-radius:8px;padding:12px 16px;box-shadow:0 1px 2px #0002}
#hosts{grid-row:span 2}#versions{grid-column:1/-1}
h2{font-size:15px;margin:0 0 8px}h3{font-size:13px;margin:12px 0 4px}.quiet{color:#6a737d;font-weight:normal}
table{border-collapse:collapse;width:100%}th{text-align:left;font-weight:600;color:#57606a;font-size:12px}td,th{padding:3px 8px 3px 0}
tbody tr{border-left:4px solid var(--c)}tbody td:first-child{padding-left:8px}tbody tr:nth-child(odd){background:#f6f8fa}
.kv th{width:90px}.name,.addr{font-family:ui-monospace,monospace;font-size:12px}.since{color:#6a737d}
.rev{display:inline-block;border-radius:10px;padding:0 8px;color:#fff;background:var(--c);font-size:12px;white-space:nowrap}
.phase{font-size:12px;padding:0 6px;border-radius:4px;background:#eaeef2}.phase.available{background:#dafbe1;color:#116329}.phase.ready{background:#ddf4ff;color:#0550ae}
.phase.starting,.phase.creating{background:#fff8c5;color:#7d4e00}.phase.draining,.phase.stopping{background:#ffebe9;color:#a40e26}.phase.failed{background:#a40e26;color:#fff}
.lb ul,.legend{list-style:none;margin:0;padding:0;display:flex;flex-wrap:wrap;gap:6px}
.server{border-left:4px solid var(--c);background:#f6f8fa;padding:2px 8px;border-radius:4px}.server.down{opacity:.55;text-decoration:line-through}.server .state{font-size:11px;color:#57606a}
.live{font-size:11px;background:#0969da;color:#fff;border-radius:8px;padding:1px 8px;vertical-align:middle}
.outcome{border-radius:8px;padding:1px 8px;color:#fff;background:#a40e26}.outcome.success{background:#1a7f37}
.weight{display:inline-block;width:120px;height:8px;background:#eaeef2;border-radius:4px;vertical-align:middle}.weight span{display:block;height:100%;background:#0969da;border-radius:4px}
.strip{display:flex;align-items:stretch;gap:2px;height:80px;border-bottom:1px solid #d0d7de}.col{flex:1;display:flex;flex-direction:column-reverse}.col span{display:block;min-height:1px}
.summary{font-weight:normal;margin-left:8px}.count{color:#57606a;font-size:12px;margin-left:6px}
.legend{margin-top:8px}.legend li{display:flex;align-items:center;gap:4px}.dot{width:10px;height:10px;border-radius:50%;display:inline-block}
@media (max-width:900px){main{grid-template-columns:1fr}#hosts{grid-row:auto}}
`;

// Swaps in the sections the server pushes; the browser reconnects on its own after a drop.
const SCRIPT = `
const conn = document.getElementById('conn');
const es = new EventSource('events');
es.onopen = () => { conn.className = 'on'; conn.textContent = 'live'; };
es.onerror = () => { conn.className = 'off'; conn.textContent = 'disconnected (the command ended?)'; };
es.onmessage = (ev) => {
  const d = JSON.parse(ev.data);
  for (const [id, html] of Object.entries(d)) { const el = document.getElementById(id); if (el) el.innerHTML = html; }
  document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
};
`;

/** The whole page, with the sections as they are now (so it reads even before the first push). */
export function renderPage(m: FleetModel, nowMs: number): string {
  const s = renderSections(m, nowMs);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
<title>${escapeHtml(m.service)} · fleetroll</title><style>${CSS}</style></head>
<body data-updates="0"><header><h1>${escapeHtml(m.service)}</h1><span>fleetroll live view · <a href="metrics" style="color:#9ecbff">/metrics</a></span><span id="conn">connecting</span></header>
<main><section id="hosts">${s.hosts}</section><section id="rollout">${s.rollout}</section><section id="balancers">${s.balancers}</section><section id="versions">${s.versions}</section></main>
<script>${SCRIPT}</script></body></html>
`;
}
