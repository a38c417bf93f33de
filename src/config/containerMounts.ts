/**
 * The container's mounts: volumes (compose's short and long syntax: binds,
 * named and anonymous volumes), tmpfs, and secrets with the files they come
 * from (mounted read-only under /run/secrets).
 */
import type * as zod from 'zod';
import * as z from './zod.js';
import type { MountSpec } from '../core/container.js';
import { ABS_CONTAINER_PATH_RE, bytes, got, issue, oneOrMany, parseBytes, VOLUME_NAME_RE } from './containerValues.js';

/** Compose's short volume syntax: SRC:DST[:ro|rw], or DST alone (an anonymous volume). */
function shortVolume(s: string, ctx: zod.core.$RefinementCtx, i: number): MountSpec | undefined {
  const parts = s.split(':');
  if (parts.length === 1) {
    issue(ctx, `an anonymous volume (${JSON.stringify(s)}) is deleted with its instance on every deploy: name it (NAME:${s}) or use a bind mount`, [i]);
    return undefined;
  }
  if (parts.length > 3) {
    issue(ctx, `must be SOURCE:TARGET[:ro|rw] (paths may not contain ":"), ${got(s)}`, [i]);
    return undefined;
  }
  const [source, target, mode] = parts as [string, string, string | undefined];
  const opts = (mode ?? 'rw').split(',');
  if (opts.some((o) => o === 'z' || o === 'Z')) {
    // Docker's mount API (which fleetroll uses) has no SELinux relabelling: refused rather than dropped.
    issue(ctx, `the SELinux relabel options z and Z are not supported (label the host path yourself, e.g. chcon -Rt container_file_t), ${got(mode)}`, [i]);
    return undefined;
  }
  if (!opts.every((o) => ['ro', 'rw', 'nocopy'].includes(o))) {
    issue(ctx, `mode must be ro or rw (optionally with nocopy), ${got(mode)}`, [i]);
    return undefined;
  }
  return {
    type: source.startsWith('/') ? 'bind' : 'volume',
    source,
    target,
    readOnly: opts.includes('ro'),
    ...(opts.includes('nocopy') ? { noCopy: true } : {}),
  };
}

const longVolume = z
  .object(
    {
      type: z.enum(['bind', 'volume', 'tmpfs'], { error: (i) => `must be "bind", "volume" or "tmpfs", ${got(i.input)}` }),
      source: z.string({ error: (i) => `must be a string, ${got(i.input)}` }).optional(),
      target: z.string({ error: (i) => (i.input === undefined ? 'is required' : `must be a string, ${got(i.input)}`) }),
      readOnly: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional(),
      volume: z
        .object(
          { nocopy: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional() },
          { error: (i) => `must be a mapping { nocopy }, ${got(i.input)}` },
        )
        .strict()
        .optional(),
      tmpfs: z
        .object(
          {
            size: z.union([z.number(), z.string()], { error: (i) => `must be bytes or a size like "64m", ${got(i.input)}` }).optional(),
            mode: z
              .number({ error: (i) => `must be a file mode from 0 to 0o7777 (a number: 0o1777 is 1023), ${got(i.input)}` })
              .int()
              .min(0)
              .max(0o7777)
              .optional(),
          },
          { error: (i) => `must be a mapping { size, mode }, ${got(i.input)}` },
        )
        .strict()
        .optional(),
      bind: z
        .object(
          { createHostPath: z.boolean({ error: (i) => `must be true or false, ${got(i.input)}` }).optional() },
          { error: (i) => `must be a mapping { createHostPath }, ${got(i.input)}` },
        )
        .strict()
        .optional(),
    },
    { error: (i) => `must be "SOURCE:TARGET[:ro]" or a mapping { type, source, target, readOnly }, ${got(i.input)}` },
  )
  .strict();

export const volumes = z
  .array(z.unknown(), { error: (i) => `must be a list of volumes ("SOURCE:TARGET[:ro]" or { type, source, target }), ${got(i.input)}` })
  .transform((list, ctx) => {
    const out: MountSpec[] = [];
    const targets = new Map<string, number>();
    list.forEach((item, i) => {
      let m: MountSpec | undefined;
      // Parsed one by one rather than as a union, so a long form's own field messages (readOnly, tmpfs/mode) reach the user.
      let v: string | zod.output<typeof longVolume>;
      if (typeof item === 'string') v = item;
      else {
        const r = longVolume.safeParse(item);
        if (!r.success) {
          for (const x of r.error.issues) ctx.addIssue({ ...x, path: [i, ...x.path] } as Parameters<typeof ctx.addIssue>[0]);
          return;
        }
        v = r.data;
      }
      if (typeof v === 'string') m = shortVolume(v, ctx, i);
      else {
        const size = v.tmpfs?.size === undefined ? undefined : parseBytes(v.tmpfs.size);
        if (v.tmpfs?.size !== undefined && size === undefined) issue(ctx, `must be bytes or a size like "64m", ${got(v.tmpfs.size)}`, [i, 'tmpfs', 'size']);
        if (v.type !== 'tmpfs' && v.source === undefined) issue(ctx, `is required for a ${v.type} mount`, [i, 'source']);
        if (v.type === 'tmpfs' && v.source !== undefined) issue(ctx, 'a tmpfs mount has no source', [i, 'source']);
        if (v.bind?.createHostPath)
          issue(ctx, 'fleetroll never creates host paths: create the source on each host (preflight checks it exists)', [i, 'bind', 'createHostPath']);
        m = {
          type: v.type,
          ...(v.source !== undefined ? { source: v.source } : {}),
          target: v.target,
          readOnly: v.readOnly ?? false,
          ...(v.volume?.nocopy ? { noCopy: true } : {}),
          ...(size !== undefined ? { sizeBytes: size } : {}),
          ...(v.tmpfs?.mode !== undefined ? { mode: v.tmpfs.mode } : {}),
        };
      }
      if (!m) return;
      const path = typeof v === 'string' ? [i] : [i, 'target'];
      if (!ABS_CONTAINER_PATH_RE.test(m.target) || m.target.split('/').includes('..'))
        issue(ctx, `target must be an absolute path in the container (letters, digits, ._-/@+=~, no ".."), ${got(m.target)}`, path);
      if (m.type === 'bind' && m.source !== undefined && (!ABS_CONTAINER_PATH_RE.test(m.source) || m.source.split('/').includes('..'))) {
        issue(
          ctx,
          `a bind source must be an absolute host path (one starting with ./ or ../ is resolved against the fleet file's directory), ${got(m.source)}`,
          typeof v === 'string' ? [i] : [i, 'source'],
        );
      }
      if (m.type === 'volume' && m.source !== undefined && !VOLUME_NAME_RE.test(m.source))
        issue(
          ctx,
          `a volume name must be letters, digits, "_", ".", "-" (starting with a letter or digit), ${got(m.source)}`,
          typeof v === 'string' ? [i] : [i, 'source'],
        );
      const seen = targets.get(m.target);
      if (seen !== undefined) issue(ctx, `target ${m.target} is already mounted by volumes/${seen}`, path);
      targets.set(m.target, i);
      out.push(m);
    });
    return out;
  });

export const tmpfs = oneOrMany(
  z.string({ error: (i) => `must be a path or a list of paths ("/scratch" or "/scratch:size=64m"), ${got(i.input)}` }),
  'a path or a list of paths ("/scratch" or "/scratch:size=64m")',
).transform((list, ctx) => {
  const out: Record<string, string> = {};
  list.forEach((entry, i) => {
    const colon = entry.indexOf(':');
    const path = colon < 0 ? entry : entry.slice(0, colon);
    const opts = colon < 0 ? '' : entry.slice(colon + 1);
    if (!ABS_CONTAINER_PATH_RE.test(path)) issue(ctx, `must be an absolute path in the container, ${got(path)}`, [i]);
    if (opts && !/^(?:(?:size=[0-9]+[kmg]?|mode=[0-7]{3,4}|uid=[0-9]+|gid=[0-9]+|noexec|nosuid|nodev|exec|suid|dev|ro|rw)(?:,|$))+$/.test(opts)) {
      issue(ctx, `options must be size=N[k|m|g], mode=OCTAL, uid=N, gid=N, noexec, nosuid, nodev, ro or rw, comma-separated, ${got(opts)}`, [i]);
    }
    out[path] = opts;
  });
  return out;
});

const SECRET_NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,63}$/;

export const secretsList = z
  .array(
    z.union([z.string(), z.object({ source: z.string(), target: z.string().optional() }).strict()], {
      error: (i) => `must be a secret name or { source, target }, ${got(i.input)}`,
    }),
    {
      error: (i) => `must be a list of secret names (defined under secretFiles), ${got(i.input)}`,
    },
  )
  .transform((list, ctx) => {
    const targets = new Map<string, number>();
    return list.map((s, i) => {
      const name = typeof s === 'string' ? s : s.source;
      const target = typeof s === 'string' ? s : (s.target ?? s.source);
      if (!SECRET_NAME_RE.test(name)) issue(ctx, `must be a secret name (letters, digits, "_", ".", "-"), ${got(name)}`, [i]);
      if (!SECRET_NAME_RE.test(target))
        issue(ctx, `target must be a file name under /run/secrets (letters, digits, "_", ".", "-"), ${got(target)}`, [i, 'target']);
      // Docker refuses two mounts at one path only when the container is created, on the host: say it here.
      const seen = targets.get(target);
      if (seen !== undefined) issue(ctx, `target /run/secrets/${target} is already mounted by secrets/${seen}`, typeof s === 'string' ? [i] : [i, 'target']);
      targets.set(target, i);
      return { name, target };
    });
  });

/** compose's top-level `secrets:` definitions: a file on this machine (absolute after loading). */
export const secretFiles = z.record(
  z.string().regex(SECRET_NAME_RE, { error: (i) => `secret names are letters, digits, "_", ".", "-", ${got(i.input)}` }),
  z
    .object(
      {
        file: z
          .string({
            error: (i) =>
              i.input === undefined ? 'is required: the path of a file on this machine (only { file: PATH } is supported)' : `must be a path, ${got(i.input)}`,
          })
          .min(1, { error: 'must be a path' }),
      },
      { error: (i) => `must be { file: PATH } (a file on every host, mounted read-only under /run/secrets), ${got(i.input)}` },
    )
    .strict(),
);
