import { expect } from 'chai';
import { createServer, type Server, type Socket } from 'node:net';
import { CoreV1Api, HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
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
    // A real socket's deadline: what is asserted is the outcome (aborted, as a network failure)
    // and that it did not come before the deadline. A call never aborted would wait on the
    // tarpit forever: the test's timeout reports that, not a time bound here.
    expect(elapsed, 'ms until the call failed').to.be.at.least(250);
    // The aborted request does not leave its connection behind in the tarpit.
    for (let i = 0; i < 100 && sockets.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
    expect(sockets.size).to.equal(0);
  });

  it('gives calls that start close together one signal, never a deadline shorter than the timeout, and later calls a fresh one', async () => {
    const kc = withRequestDeadline(kubeConfig(), 300);
    const api = kc.makeApiClient(CoreV1Api);
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      // What each call is given, as the generated client asks for it.
      const signalOf = async () => {
        const context = new RequestContext('https://127.0.0.1/', HttpMethod.GET);
        await kc.applySecurityAuthentication(context);
        return context.getSignal();
      };
      const first = await signalOf();
      expect(await signalOf()).to.equal(first);
      // Thirty calls at once wait on the same signal (one listener each), and all fail at its deadline.
      const started = Date.now();
      const outcomes = await Promise.all(
        Array.from({ length: 30 }, () =>
          api.listNamespace().then(
            () => 'answered',
            (e: unknown) => classifyApiError(e),
          ),
        ),
      );
      expect(outcomes).to.deep.equal(Array(30).fill('Network'));
      // Not before the timeout; that they fail at all (one shared signal aborting them) is on the
      // test's timeout, not on a wall-clock upper bound.
      expect(Date.now() - started, 'ms until they failed').to.be.at.least(290);
      // A call started after the first signal fired gets a fresh one, with its whole timeout.
      const later = await signalOf();
      expect(later).to.not.equal(first);
      expect(first?.aborted).to.equal(true);
      expect(later?.aborted).to.equal(false);
      const again = Date.now();
      expect(
        await api.listNamespace().then(
          () => 'answered',
          (e: unknown) => classifyApiError(e),
        ),
      ).to.equal('Network');
      expect(Date.now() - again, 'ms until the later call failed').to.be.at.least(290);
      await new Promise((r) => setImmediate(r));
      expect(warnings.map((w) => w.message)).to.deep.equal([]);
    } finally {
      process.off('warning', onWarning);
    }
  }).timeout(10_000);

  it('leaves a call that brings its own signal with it', async () => {
    const kc = withRequestDeadline(kubeConfig(), 300);
    const own = new AbortController().signal;
    const context = new RequestContext('https://127.0.0.1/', HttpMethod.GET);
    context.setSignal(own);
    await kc.applySecurityAuthentication(context);
    expect(context.getSignal()).to.equal(own);
  });

  it('without it, the same call is still pending after the deadline would have passed', async () => {
    const api = kubeConfig().makeApiClient(CoreV1Api);
    const outcome = await Promise.race([
      api.listNamespace().then(
        () => 'answered',
        () => 'failed',
      ),
      new Promise((r) => setTimeout(() => r('pending'), 600)),
    ]);
    expect(outcome).to.equal('pending');
  });
});
