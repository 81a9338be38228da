import { expect } from 'chai';
import { createServer, type Server, type Socket } from 'node:net';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { classifyApiError } from '../../../../provider/core/errors.js';
import { withRequestDeadline } from '../../../../provider/clusters/request-deadline.js';

describe('withRequestDeadline', () => {
  // A tarpit: accepts connections, reads what comes (so it sees the client close) and never
  // answers, not even the TLS handshake.
  let tarpit: Server;
  let port: number;
  const sockets = new Set<Socket>();
  before(async () => {
    tarpit = createServer((s) => {
      sockets.add(s);
      s.resume();
      s.on('close', () => sockets.delete(s));
    });
    await new Promise<void>((res) => tarpit.listen(0, '127.0.0.1', res));
    port = (tarpit.address() as { port: number }).port;
  });
  after(async () => {
    for (const s of sockets) s.destroy();
    await new Promise((res) => tarpit.close(res));
  });

  function kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: `https://127.0.0.1:${port}`, skipTLSVerify: false }],
      users: [{ name: 'u', token: 't' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return kc;
  }

  it('aborts an API call to a server that never answers, as a retryable network failure, and closes the socket', async () => {
    const api = withRequestDeadline(kubeConfig(), 300).makeApiClient(CoreV1Api);
    const started = Date.now();
    const err = await api.listNamespace().then(
      () => expect.fail('answered'),
      (e: unknown) => e,
    );
    const elapsed = Date.now() - started;
    expect(classifyApiError(err)).to.equal('Network');
    expect(elapsed, 'ms until the call failed').to.be.within(250, 5000);
    // The aborted request does not leave its connection behind in the tarpit.
    for (let i = 0; i < 100 && sockets.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(sockets.size).to.equal(0);
  });

  it('without it, the same call is still pending after the deadline would have passed', async () => {
    const api = kubeConfig().makeApiClient(CoreV1Api);
    const outcome = await Promise.race([api.listNamespace().then(() => 'answered', () => 'failed'), new Promise((r) => setTimeout(() => r('pending'), 600))]);
    expect(outcome).to.equal('pending');
  });
});
