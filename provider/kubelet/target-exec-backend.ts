import { Attach, Exec, type KubeConfig, type V1Status } from '@kubernetes/client-node';
import type WebSocket from 'ws';
import type { ExecBackend, ExecIO, ExecRequest, ExecResult } from './remotecommand.js';

// Channel 4 of the WebSocket channel protocols carries terminal resizes.
const RESIZE_CHANNEL = 4;

/**
 * ExecBackend that runs exec/attach on the delegate in a target cluster through client-node's
 * `Exec`/`Attach` (outbound WebSocket). `req.namespace`/`req.pod` are the delegate's. Writables
 * are passed for every requested channel (client-node throws on output for a null channel);
 * resizes are forwarded as channel-4 messages (client-node only does that for TTY streams).
 * The Status received on the remote error channel is passed through verbatim.
 */
export function createTargetExecBackend(kubeConfig: KubeConfig): ExecBackend {
  const run = async (mode: 'exec' | 'attach', req: ExecRequest, io: ExecIO): Promise<ExecResult> => {
    let status: V1Status | undefined;
    let resolveStatus: () => void = () => undefined;
    const statusSeen = new Promise<void>((r) => (resolveStatus = r));
    const ws: WebSocket =
      mode === 'exec'
        ? ((await new Exec(kubeConfig).exec(
            req.namespace,
            req.pod,
            req.container,
            req.command,
            io.stdout ?? null,
            io.stderr ?? null,
            io.stdin ?? null,
            req.tty,
            (s) => {
              status = s;
              resolveStatus();
            },
          )) as unknown as WebSocket)
        : ((await new Attach(kubeConfig).attach(
            req.namespace,
            req.pod,
            req.container,
            io.stdout ?? null,
            io.stderr ?? null,
            io.stdin ?? null,
            req.tty,
          )) as unknown as WebSocket);
    const onAbort = () => ws.close();
    io.signal.addEventListener('abort', onAbort, { once: true });
    if (req.tty && io.resize) {
      void (async () => {
        for await (const size of io.resize!) {
          if (ws.readyState !== ws.OPEN) break;
          ws.send(Buffer.concat([Buffer.from([RESIZE_CHANNEL]), Buffer.from(JSON.stringify({ Width: size.width, Height: size.height }))]));
        }
      })().catch(() => undefined);
    }
    await Promise.race([statusSeen, new Promise<void>((r) => ws.once('close', () => r()))]);
    io.signal.removeEventListener('abort', onAbort);
    if (ws.readyState === ws.OPEN) ws.close();
    if (status) return { status };
    if (mode === 'attach') return { exitCode: 0 };
    throw new Error('connection to the target closed before the command reported its status');
  };
  return {
    exec: (req, io) => run('exec', req, io),
    attach: (req, io) => run('attach', req, io),
  };
}
