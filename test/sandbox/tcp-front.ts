import http from 'node:http';
import net from 'node:net';

/**
 * The sandbox's stand-in for the provider's Service when c1 runs several provider replicas: the
 * apiserver's webhook configuration has one URL and the proxy scheduler's extender one origin,
 * so both point here, and this forwards each TCP connection (TLS passes through untouched: the
 * replicas share the serving certificate, from Secret admiralty-webhook-cert) to one replica.
 *
 * As a Service routes only to Ready endpoints, it polls every replica's `/readyz` every 250 ms
 * and takes turns among the Ready ones (all of them when none is). Unlike kube-proxy, a
 * connection refused by a replica that died since the last poll is tried on the next one:
 * in a cluster, the kubelet's readiness probe and the endpoints update take that window, which
 * this does not try to reproduce. Loopback only.
 *
 * Usage: `tcp-front.ts --listen=<port> --backends=<port>,<port> --readyz=<port>,<port>`
 * (readyz ports are the replicas' metrics ports, in the same order as their backends).
 */
function main(argv: string[]): void {
  const flags = new Map(argv.map((a) => a.replace(/^--/, '').split('=') as [string, string]));
  const listen = Number(flags.get('listen'));
  const backends = (flags.get('backends') ?? '').split(',').map(Number);
  const readyz = (flags.get('readyz') ?? '').split(',').map(Number);
  if (!listen || !backends.length || backends.some((p) => !p) || readyz.length !== backends.length) {
    console.error('usage: tcp-front --listen=<port> --backends=<port>,... --readyz=<port>,...');
    process.exit(2);
  }
  const ready = backends.map(() => false);
  const poll = () => {
    readyz.forEach((port, i) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/readyz', timeout: 1000 }, (res) => {
        ready[i] = res.statusCode === 200;
        res.resume();
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => (ready[i] = false));
    });
  };
  poll();
  setInterval(poll, 250);

  let turn = 0;
  /** Ready replicas first, in turn; the others after them, as a last resort. */
  const order = (): number[] => {
    const all = backends.map((_, i) => i);
    const up = all.filter((i) => ready[i]);
    const pool = up.length ? up : all;
    const start = turn++ % pool.length;
    const rotated = [...pool.slice(start), ...pool.slice(0, start)];
    return [...rotated, ...all.filter((i) => !rotated.includes(i))];
  };

  const server = net.createServer((client) => {
    const candidates = order();
    let upstream: net.Socket | undefined;
    client.on('error', () => upstream?.destroy());
    client.on('close', () => upstream?.destroy());
    const attempt = (k: number) => {
      if (k >= candidates.length || client.destroyed) {
        client.destroy();
        return;
      }
      const socket = net.connect({ host: '127.0.0.1', port: backends[candidates[k]!]! });
      let connected = false;
      socket.once('connect', () => {
        connected = true;
        upstream = socket;
        client.pipe(socket);
        socket.pipe(client);
      });
      socket.on('error', () => {
        if (!connected) attempt(k + 1);
        else client.destroy();
      });
      socket.on('close', () => {
        if (connected) client.destroy();
      });
    };
    attempt(0);
  });
  server.listen(listen, '127.0.0.1', () => console.log(`tcp-front: 127.0.0.1:${listen} -> ${backends.join(', ')}`));
  // Open connections would hold a graceful close: a Service going away drops them too.
  for (const s of ['SIGTERM', 'SIGINT'] as const) process.once(s, () => process.exit(0));
}

main(process.argv.slice(2));
