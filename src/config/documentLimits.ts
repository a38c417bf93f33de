/**
 * The bounds on a document a user hands fleetroll, in one place: its size,
 * its nesting, how many problems one error lists, and what aliases may
 * expand to. Reading (textFile.ts) and parsing (document.ts, yamlPlain.ts,
 * yamlPlaces.ts) hold to them.
 */
/** The largest document read: a real fleet file is a few KiB; this bounds memory and parse time. */
export const MAX_DOCUMENT_BYTES = 1024 * 1024;
/** The deepest nesting of mappings and lists accepted; a fleet file needs about six. */
export const MAX_DEPTH = 64;
/** Problems listed before the rest are only counted: one pass of fixes needs no more. */
export const MAX_ISSUES = 20;
/** Values aliases may expand to, where they are allowed (compose files): far above any real file, far below a billion laughs. */
export const MAX_EXPANDED_NODES = 100_000;
