/**
 * A compose service's mounts as fleet fields: volumes (short and long
 * syntax, binds, named and anonymous volumes, tmpfs), configs and secrets
 * (as bind-mounted files).
 */
import { isAbsolute, resolve as resolvePath } from 'node:path';
import { bytesOrIssue, checkVolumeDefinition, expandHome, isPathLike, refuse, resourceName, warn, type Ctx } from './composeMapping.js';
import { isObj, type Json } from './composeRead.js';

const SHORT_VOLUME_MODES =
  /^(ro|rw|z|Z|nocopy|cached|delegated|consistent|shared|rshared|slave|rslave|private|rprivate)(,(ro|rw|z|Z|nocopy|cached|delegated|consistent|shared|rshared|slave|rslave|private|rprivate))*$/;

export function mapVolumes(c: Ctx, v: unknown): void {
  const out: unknown[] = [];
  (v as unknown[]).forEach((item, i) => {
    const p = `volumes/${i}`;
    if (typeof item === 'string') {
      const parts = item.split(':');
      if (parts.length === 1) {
        out.push(item); // anonymous volume: a fresh one per instance
        return;
      }
      const [src, target, mode, ...extra] = parts as [string, string, string | undefined, ...string[]];
      if (extra.length > 0 || target === '' || (mode !== undefined && !SHORT_VOLUME_MODES.test(mode))) {
        refuse(c, p, 'expected SOURCE:TARGET[:MODE] with MODE such as ro, rw, z, Z or nocopy');
        return;
      }
      let source: string | undefined;
      if (isPathLike(src)) source = resolvePath(c.dir, expandHome(src));
      else {
        source = resourceName(c, 'volumes', src, p);
        checkVolumeDefinition(c, src, p);
      }
      if (source !== undefined) out.push(`${source}:${target}${mode !== undefined ? `:${mode}` : ''}`);
      return;
    }
    const o = item as Json;
    const type = String(o.type);
    if (type !== 'bind' && type !== 'volume' && type !== 'tmpfs') {
      refuse(c, `${p}/type`, `fleetroll mounts bind, volume and tmpfs, got ${JSON.stringify(type)}`);
      return;
    }
    const m: Json = { type };
    if (typeof o.source === 'string' && o.source !== '') {
      if (type === 'bind') m.source = resolvePath(c.dir, expandHome(o.source));
      else if (type === 'volume') {
        m.source = resourceName(c, 'volumes', o.source, `${p}/source`);
        checkVolumeDefinition(c, o.source, p);
      } else refuse(c, `${p}/source`, 'a tmpfs mount has no source');
    } else if (type === 'bind') refuse(c, `${p}/source`, 'a bind mount needs source (a host path)');
    m.target = o.target;
    if (o.read_only !== undefined) m.readOnly = o.read_only === true || o.read_only === 'true';
    if (o.consistency !== undefined) warn(c, `${p}/consistency`, 'only Docker Desktop for Mac uses it; ignored');
    const supported: Record<string, string[]> = { bind: [], volume: ['nocopy'], tmpfs: ['size'] };
    for (const sub of ['bind', 'volume', 'tmpfs', 'image'] as const) {
      const opts = o[sub];
      if (!isObj(opts)) continue;
      const keep: Json = {};
      for (const [k, x] of Object.entries(opts)) {
        if (k.startsWith('x-')) continue;
        if (sub === type && supported[sub]?.includes(k)) keep[k] = k === 'size' ? bytesOrIssue(c, `${p}/tmpfs/size`, x) : x === true || x === 'true';
        else
          refuse(
            c,
            `${p}/${sub}/${k}`,
            `fleetroll's volume long form carries source, target, read_only, volume.nocopy and tmpfs.size; use the short syntax (SOURCE:TARGET:MODE) for z/Z or propagation`,
          );
      }
      if (Object.keys(keep).length > 0) m[sub] = keep;
    }
    out.push(m);
  });
  if (out.length > 0) c.fields.volumes = [...((c.fields.volumes as unknown[] | undefined) ?? []), ...out];
}

/**
 * Each item of a service's configs: or secrets: (short or long syntax, as
 * `{ source, ... }`) with its top-level definition; one the top level does
 * not define is refused and skipped.
 */
function eachDefined(c: Ctx, v: unknown, kind: 'config' | 'secret', f: (o: Json, source: string, def: Json, p: string) => void): void {
  const key = `${kind}s`;
  const defs = isObj(c.doc[key]) ? (c.doc[key] as Json) : {};
  (v as unknown[]).forEach((item, i) => {
    const p = `${key}/${i}`;
    const o: Json = typeof item === 'string' ? { source: item } : (item as Json);
    const source = String(o.source);
    const def = defs[source];
    if (!isObj(def)) refuse(c, p, `refers to ${kind} ${JSON.stringify(source)}, which the top-level ${key}: does not define`);
    else f(o, source, def as Json, p);
  });
}

export function mapConfigs(c: Ctx, v: unknown): void {
  const out: unknown[] = [];
  eachDefined(c, v, 'config', (o, source, def, p) => {
    if (typeof def.file !== 'string') {
      const kind = def.external ? 'external' : def.content !== undefined ? 'content' : def.environment !== undefined ? 'environment' : 'this';
      c.issues.push({
        path: `configs/${source}`,
        message: `a ${kind} config would need a file written on every host; fleetroll mounts configs given as file: (used at ${c.base}/${p})`,
      });
      return;
    }
    for (const k of ['uid', 'gid', 'mode'])
      if (o[k] !== undefined) warn(c, `${p}/${k}`, "a file config is a bind mount: it keeps the file's own owner and mode (compose ignores this too)");
    const target = typeof o.target === 'string' ? (isAbsolute(o.target) ? o.target : `/${o.target}`) : `/${source}`;
    out.push({ type: 'bind', source: resolvePath(c.dir, expandHome(def.file)), target, readOnly: true });
  });
  if (out.length > 0) c.fields.volumes = [...((c.fields.volumes as unknown[] | undefined) ?? []), ...out];
}

export function mapSecrets(c: Ctx, v: unknown): void {
  const secrets: unknown[] = [];
  const files: Json = {};
  eachDefined(c, v, 'secret', (o, source, def, p) => {
    const dp = `secrets/${source}`;
    let ok = true;
    if (def.external) {
      c.issues.push({ path: `${dp}/external`, message: 'an external secret lives in a Swarm cluster; fleetroll mounts file: secrets' });
      ok = false;
    }
    for (const k of ['driver', 'driver_opts', 'template_driver']) {
      if (def[k] !== undefined) {
        c.issues.push({ path: `${dp}/${k}`, message: 'secret drivers are a Swarm feature; fleetroll mounts file: secrets' });
        ok = false;
      }
    }
    if (ok && typeof def.file === 'string') files[source] = { file: resolvePath(c.dir, expandHome(def.file)) };
    else if (ok && typeof def.environment === 'string') {
      // A secret file needs a source on every host; one made from a variable has none (yet): refused, not dropped.
      c.issues.push({
        path: `${dp}/environment`,
        message: `fleetroll mounts secrets from files only: put the value in a file (secrets: { ${source}: { file: ./${source}.txt } }), or pass ${def.environment} as an environment variable instead`,
      });
      ok = false;
    } else if (ok) {
      c.issues.push({ path: dp, message: 'needs file: or environment:' });
      ok = false;
    }
    if (!ok) return;
    for (const k of ['uid', 'gid', 'mode'])
      if (o[k] !== undefined) warn(c, `${p}/${k}`, "a file secret is a bind mount: it keeps the file's own owner and mode (compose ignores this too)");
    secrets.push(typeof o.target === 'string' ? { source, target: o.target } : source);
  });
  if (secrets.length > 0) c.fields.secrets = secrets;
  if (Object.keys(files).length > 0) c.fields.secretFiles = files;
}
