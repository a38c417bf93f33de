/**
 * `nginx -t` on many rendered upstream files at once: each file is included
 * at http level of one temporary nginx.conf (as templates/nginx.conf.example
 * includes the upstream file) with a location proxying to each upstream or
 * route variable it defines, so nginx resolves every name. Files that define
 * the same upstream or map variable go into different configs. A config
 * that fails is retried file by file, so a failure is pinned on the file
 * that fails alone (a batch can also fail for reasons of its own, e.g. too
 * many map variables for nginx's default variables_hash_max_size).
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface Rendered {
  /** Names the case and phase in failure messages. */
  id: string;
  content: string;
  /** What nginx.conf would proxy_pass to: upstream names and `$fleetroll_..._route` variables. */
  proxies: string[];
}

export interface NginxOutcome {
  configs: number;
  nginxRuns: number;
  files: number;
  /** Batches that failed while each of their files passed alone. */
  batchOnlyFailures: number;
  /** What nginx said about those batches. */
  batchOnlyOutputs: string[];
  failures: { id: string; output: string; content: string }[];
}

function definedNames(content: string): string[] {
  return [...content.matchAll(/^\s*upstream\s+(\S+)\s*\{/gm), ...content.matchAll(/^\s*map\s+\S+\s+(\$\S+)\s*\{/gm)].map((m) => m[1] ?? '');
}

export function nginxCheckAll(nginx: string, dir: string, files: readonly Rendered[], batchSize = 40): NginxOutcome {
  const batches: { names: Set<string>; files: Rendered[] }[] = [];
  for (const f of files) {
    // nginx compares upstream and variable names ignoring case.
    const names = definedNames(f.content).map((n) => n.toLowerCase());
    let b = batches.find((x) => x.files.length < batchSize && names.every((n) => !x.names.has(n)));
    if (!b) batches.push((b = { names: new Set(), files: [] }));
    for (const n of names) b.names.add(n);
    b.files.push(f);
  }
  const outcome: NginxOutcome = { configs: 0, nginxRuns: 0, files: files.length, batchOnlyFailures: 0, batchOnlyOutputs: [], failures: [] };
  let k = 0;
  const test = (group: Rendered[]): { ok: boolean; output: string } => {
    const d = join(dir, `nginx-${k++}`);
    mkdirSync(join(d, 'tmp'), { recursive: true });
    const includes: string[] = [];
    const locations: string[] = [];
    group.forEach((f, i) => {
      writeFileSync(join(d, `u${i}.conf`), f.content);
      includes.push(`    include ${d}/u${i}.conf;`);
      f.proxies.forEach((p, j) => locations.push(`        location = /f${i}/p${j} { proxy_pass http://${p}; }`));
    });
    const temp = ['client_body', 'proxy', 'fastcgi', 'uwsgi', 'scgi'].map((t) => `    ${t}_temp_path ${d}/tmp;`).join('\n');
    const conf = join(d, 'nginx.conf');
    writeFileSync(
      conf,
      `pid ${d}/nginx.pid;\nerror_log stderr;\nevents {}\nhttp {\n    access_log off;\n${temp}\n${includes.join('\n')}\n    server {\n        listen 127.0.0.1:1;\n${locations.join('\n')}\n    }\n}\n`,
    );
    outcome.configs++;
    outcome.nginxRuns++;
    const r = spawnSync(nginx, ['-t', '-q', '-p', d, '-c', conf, '-e', 'stderr'], { encoding: 'utf8', timeout: 30_000 });
    const ok = r.status === 0;
    if (ok) rmSync(d, { recursive: true, force: true });
    return { ok, output: `${ok ? '' : `nginx -t: status ${r.status ?? r.signal}\n`}${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
  };
  for (const b of batches) {
    const together = test(b.files);
    if (together.ok) continue;
    let pinned = 0;
    for (const f of b.files) {
      const alone = test([f]);
      if (!alone.ok) {
        pinned++;
        outcome.failures.push({ id: f.id, output: alone.output.trim(), content: f.content });
      }
    }
    if (pinned === 0) {
      outcome.batchOnlyFailures++;
      outcome.batchOnlyOutputs.push(together.output.trim());
    }
  }
  return outcome;
}
