import { fork, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/**
 * A flooding peer in its own process, so that its writes block on TCP alone (in-process, a busy
 * server would also starve the attacker's event loop and hide a missing back-pressure). It
 * connects to 127.0.0.1:port (TLS when `tls`), sends `preamble` and then `unit` repeated up to
 * `totalBytes`, never reads, and reports how many bytes the kernel took before the socket
 * stayed blocked for `stallMs` (or, with `pieceBytes`, trickles `unit` once in tiny writes).
 * The caller kills it.
 */
export interface FloodResult {
  sentBytes: number;
  child: ChildProcess;
}

export function flood(opts: {
  port: number;
  tls?: boolean;
  preamble?: Buffer;
  unit: Buffer;
  totalBytes: number;
  stallMs?: number;
  /** Trickle mode: send `unit` once, in writes of this many bytes. */
  pieceBytes?: number;
}): Promise<FloodResult> {
  const child = fork(fileURLToPath(new URL('./flood-client-main.ts', import.meta.url)), [], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  child.send({
    port: opts.port,
    tls: !!opts.tls,
    preamble: (opts.preamble ?? Buffer.alloc(0)).toString('base64'),
    unit: opts.unit.toString('base64'),
    totalBytes: opts.totalBytes,
    stallMs: opts.stallMs ?? 1_000,
    pieceBytes: opts.pieceBytes,
  });
  return new Promise((resolve, reject) => {
    child.once('message', (m: { sentBytes: number }) => resolve({ sentBytes: m.sentBytes, child }));
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`flood client exited early (${code})`)));
  });
}
