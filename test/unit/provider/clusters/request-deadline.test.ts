import { expect } from 'chai';
import sinon from 'sinon';
import { createServer, type Server, type Socket } from 'node:net';
import { CoreV1Api, HttpMethod, KubeConfig, RequestContext } from '@kubernetes/client-node';
import { classifyApiError } from '../../../../provider/core/errors.js';
import { DEADLINE_SHARING_MS, withRequestDeadline } from '../../../../provider/clusters/request-deadline.js';

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

  // The deadline's timer and the clock of its sharing window, faked; sockets and TLS keep theirs.
  let clock: sinon.SinonFakeTimers | undefined;
  afterEach(() => clock?.restore());
  const fakeClock = () => (clock = sinon.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
  /** A turn of the event loop, which the fake clock does not reach. */
  const turn = () => new Promise((r) => setImmediate(r));
  /** Each call's outcome once it settles: undefined while pending, else its classification. */
  const outcomeOf = (call: Promise<unknown>) => {
    const outcome: { value?: string } = {};
    call.then(
      () => (outcome.value = 'answered'),
      (e: unknown) => (outcome.value = classifyApiError(e)),
    );
    return outcome;
  };
  /** When a signal made at time 0 with a timeout of 300 ms aborts. */
  const DEADLINE_MS = 300 + DEADLINE_SHARING_MS;
  /**
   * Moves the fake clock to 1 ms short of `deadlineMs` from now, checks the call is still
   * pending there, then to the deadline: resolves with the call's outcome once it settles.
   */
  const outcomeAtDeadline = async (timers: sinon.SinonFakeTimers, call: { value?: string }, deadlineMs: number, what: string) => {
    await turn();
    timers.tick(deadlineMs - 1);
    await turn();
    expect(call.value, `${what} settled before its deadline`).to.equal(undefined);
    timers.tick(1);
    while (call.value === undefined) await turn();
    return call.value;
  };

  it('aborts an API call to a server that never answers at its deadline, as a retryable network failure, and closes the socket', async () => {
    const timers = fakeClock();
    const api = withRequestDeadline(kubeConfig(), 300).makeApiClient(CoreV1Api);
    const call = outcomeOf(api.listNamespace());
    while (sockets.size === 0) await turn();
    expect(await outcomeAtDeadline(timers, call, DEADLINE_MS, 'the call')).to.equal('Network');
    // The aborted request does not leave its connection behind in the tarpit: that it goes at
    // all is on the test's timeout.
    while (sockets.size > 0) await turn();
  });

  it('gives calls that start close together one signal, never a deadline shorter than the timeout, and later calls a fresh one', async () => {
    const timers = fakeClock();
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
      // Thirty calls wait on the same signal (one listener each): 29 at once, the last at the
      // end of the sharing window, which still gets its whole timeout; all fail at its deadline.
      const calls = Array.from({ length: 29 }, () => outcomeOf(api.listNamespace()));
      timers.tick(DEADLINE_SHARING_MS - 1);
      expect(await signalOf()).to.equal(first);
      calls.push(outcomeOf(api.listNamespace()));
      await turn();
      timers.tick(300);
      await turn();
      expect(
        calls.filter((c) => c.value !== undefined),
        'settled before the deadline, the last within its timeout',
      ).to.deep.equal([]);
      timers.tick(1);
      while (calls.some((c) => c.value === undefined)) await turn();
      expect(calls.map((c) => c.value)).to.deep.equal(Array(30).fill('Network'));
      // A call started after the first signal fired gets a fresh one, with its whole timeout.
      const later = await signalOf();
      expect(later).to.not.equal(first);
      expect(first?.aborted).to.equal(true);
      expect(later?.aborted).to.equal(false);
      expect(await outcomeAtDeadline(timers, outcomeOf(api.listNamespace()), DEADLINE_MS, 'the later call')).to.equal('Network');
      await turn();
      expect(warnings.map((w) => w.message)).to.deep.equal([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

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
      // Real time: there is no timer of ours to fake here.
      new Promise((r) => setTimeout(() => r('pending'), DEADLINE_MS + 100)),
    ]);
    expect(outcome).to.equal('pending');
  });
});
