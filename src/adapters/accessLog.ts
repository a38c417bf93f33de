/**
 * Readers of a load balancer's access log, implementing the AccessLogSource
 * port: each read() returns the complete lines written since the previous
 * read, once each, in order. Three placements, as nginx is deployed:
 *
 * - LocalFileAccessLog: a file on this machine. It keeps the file open and
 *   reads on from its offset. Rotation (a different inode at the path) is
 *   seen on the next read: the old file is read to its end through the handle
 *   still open (nginx keeps appending to it until it reopens its logs on
 *   USR1), then the new file from 0. A file that shrank, or whose bytes before
 *   the offset changed (copytruncate, `> access.log`), is read again from 0.
 *
 * - containerFileAccessLog(): a file inside the nginx container. There is no
 *   handle to keep, so each read locates the file by identity (PathFollower,
 *   over FileOps that run in the container): with `stat`
 *   and `tail -c +N` run through docker exec (argument arrays, no shell) it
 *   follows the inode; in an image without them (fleetroll/nginx-base has
 *   only nginx) it fetches the file through Docker's archive API and follows
 *   the content. A rotated-away file is looked for among `rotatedPaths`
 *   (default: FILE.1, logrotate's first name) by inode, or by the bytes just
 *   before the offset, and read to its end there.
 *
 * - ContainerLogStreamAccessLog: nginx logging to stdout (`access_log
 *   /dev/stdout fleetroll_json;`, the official images' default target). It
 *   follows the container's log stream (dockerode logs, follow, timestamps)
 *   from `since`, demultiplexes stdout and stderr with dockerode's demuxer,
 *   and keeps only the lines that parse as fleetroll_json: nginx's notices and
 *   any other log format on the same stream are counted and dropped. A stream
 *   that ends (nginx restarted) is reopened from the last timestamp seen, and
 *   the lines Docker replays from that timestamp are dropped (tracked per
 *   output: stdout and stderr timestamps interleave out of order).
 *
 * Shared rules:
 * - "Overlap": every follower remembers the last up to 64 bytes before its
 *   offset and reads them again with the new bytes. If they differ, the file
 *   at that offset is not the one it was reading (replaced, or truncated and
 *   grown past the offset between two reads, which size alone cannot show;
 *   or a new file that got a deleted file's inode number, which file systems
 *   reuse at once).
 * - A partial last line is held (core/accessLog LineSplitter) until its
 *   newline arrives; a rotated-away file that stays unchanged for
 *   `quietReadsBeforeClose` reads (default 2) is closed and its held partial
 *   line, if any, returned as a last line.
 * - `from: 'end'` (default) starts at the end of the file at the first read
 *   (that read returns nothing; a file that does not exist yet is read from 0
 *   when it appears); `from: 'start'` reads the whole file.
 * - What cannot be recovered is counted in `counters`, never thrown: lines
 *   written between the last read and a copytruncate (LocalFileAccessLog does
 *   not look for the copy; PathFollower does, among rotatedPaths), lines in a
 *   rotated file that was deleted or overwritten by path. Not even counted: a
 *   file that was created and rotated away entirely between two reads (reads
 *   are seconds apart, rotations hours).
 * - A Docker or file system failure is thrown as a FleetrollError
 *   (E_ACCESS_LOG) naming the source; the caller decides whether a rollout
 *   goes on without its access log.
 */
// The readers, one file each; callers import them from here.
export type { FileFollowOptions } from './accessLogShared.js';
export { archiveFileOps, containerFileAccessLog, execFileOps, type ContainerFileOptions } from './containerFileAccessLog.js';
export { LocalFileAccessLog } from './localFileAccessLog.js';
export { ContainerLogStreamAccessLog, type LogStreamOptions } from './logStreamAccessLog.js';
export { localFileOps, PathFollower, type FileOps, type PathFollowOptions } from './pathFollower.js';
