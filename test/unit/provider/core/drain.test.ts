import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { drainOnRequest } from '../../../../provider/core/drain.js';

/** GET through `agent`: status, the Connection header, and the socket it went over. */
function get(port: number, agent: http.Agent, path = '/'): Promise<{ connection?: string; socket: import('node:net').Socket }> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path, agent }, (res) => {
      res.resume();
      res.on('end', () => resolve({ connection: res.headers.connection, socket: req.socket! }));
    });
    req.on('error', reject);
  });
}

describe('drainOnRequest', () => {
  let server: http.Server;
  let port: number;
  let release: () => void = () => undefined;
  let drain: ReturnType<typeof drainOnRequest>;
  const agent = () => new http.Agent({ keepAlive: true, maxSockets: 1 });

  beforeEach(async () => {
    server = http.createServer((req, res) => {
      if (req.url === '/slow') release = () => res.end('slow');
      else res.end('ok');
    });
    drain = drainOnRequest(server);
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterEach(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it('keeps connections alive until drained, then answers with Connection: close and the connection ends', async () => {
    const a = agent();
    const first = await get(port, a);
    expect(first.connection).to.equal('keep-alive');
    const second = await get(port, a);
    expect(second.socket, 'the connection was reused').to.equal(first.socket);
    expect(drain.draining).to.equal(false);

    drain.drain();
    expect(drain.draining).to.equal(true);
    const third = await get(port, a);
    expect(third.connection).to.equal('close');
    await new Promise<void>((r) => (third.socket.destroyed ? r() : third.socket.once('close', () => r())));
    // The next request needs a new connection: through a Service, to a replica that stays.
    const fourth = await get(port, a);
    expect(fourth.socket).to.not.equal(third.socket);
    expect(fourth.connection).to.equal('close');
    a.destroy();
  });

  it('closes the connection of a request already in progress when the drain starts, after its answer', async () => {
    const a = agent();
    const pending = get(port, a, '/slow');
    await new Promise((r) => setTimeout(r, 50));
    drain.drain();
    release();
    expect((await pending).connection).to.equal('close');
    a.destroy();
  });
});
