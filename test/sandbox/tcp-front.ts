import http from 'node:http';
import net from 'node:net';

/**
 * The sandbox's stand-in for the provider's Service when c1 runs several provider replicas: the
 * apiserver's webhook configuration has one URL and the proxy scheduler's extender one origin,
 * so both point here, and this forwards each TCP connection (TLS passes through untouched: the
 * replicas share the serving certificate, from Secret admiralty-webhook-cert) to one replica.
 *
 * As a Service routes only to Ready endpoints, it polls every replica's `/readyz` every 250 ms
 * and takes turns among the Ready ones (all of them when none is), each answer taking effect
 * `--endpoints-lag-ms` later (default 1000), as an endpoints update reaches kube-proxy. As
 * with kube-proxy, a connection goes to the replica chosen and nowhere else: if that replica
 * no longer listens (it died or closed since), the client's connection is dropped and its call
 * fails, so a replica that is going away must keep listening a while
 * (`--shutdown-delay-seconds`). Loopback only.
 *
 * Usage: `tcp-front.ts --listen=<port> --backends=<port>,<port> --readyz=<port>,<port> [--endpoints-lag-ms=<ms>]`
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
  // What a Service routes to lags what the replicas say: the endpoints update travels to
  // kube-proxy (about a second). A replica's answer takes effect that much later.
  const lagMs = Number(flags.get('endpoints-lag-ms') ?? 1000);
  const ready = backends.map(() => false);
  const observe = (i: number, isReady: boolean) => setTimeout(() => (ready[i] = isReady), lagMs);
  const poll = () => {
    readyz.forEach((port, i) => {
      const req = http.get({ host: '127.0.0.1', port, path: '/readyz', timeout: 1000 }, (res) => {
        observe(i, res.statusCode === 200);
        res.resume();
      });
      req.on('timeout', () => req.destroy());
      req.on('error', () => observe(i, false));
    });
  };
  poll();
  setInterval(poll, 250);

  let turn = 0;
  /** The Ready replicas in turn (all of them when none is Ready, as a last resort). */
  const choose = (): number => {
    const all = backends.map((_, i) => i);
    const up = all.filter((i) => ready[i]);
    const pool = up.length ? up : all;
    return pool[turn++ % pool.length]!;
  };

  const server = net.createServer((client) => {
    const upstream = net.connect({ host: '127.0.0.1', port: backends[choose()]! });
    client.on('error', () => upstream.destroy());
    client.on('close', () => upstream.destroy());
    upstream.once('connect', () => {
      client.pipe(upstream);
      upstream.pipe(client);
    });
    // A refused or broken upstream drops the client; an upstream that ends (a replica answered
    // with Connection: close) ends the client through the pipe, after the answer's last byte.
    upstream.on('error', () => client.destroy());
    upstream.on('close', (hadError) => {
      if (hadError || !client.writableEnded) client.destroy();
    });
  });
  server.listen(listen, '127.0.0.1', () => console.log(`tcp-front: 127.0.0.1:${listen} -> ${backends.join(', ')}`));
  // Open connections would hold a graceful close: a Service going away drops them too.
  for (const s of ['SIGTERM', 'SIGINT'] as const) process.once(s, () => process.exit(0));
}

main(process.argv.slice(2));
