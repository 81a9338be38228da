import { expect } from 'chai';
import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import { join } from 'node:path';
import tls from 'node:tls';
import { DEFAULT_CONNECTION_LIMITS } from '../../provider/core/connection-limits.js';
import { SOURCE_POD_MANIFEST_ANNOTATION } from '../../provider/core/keys.js';
import { WEBHOOK_CONNECTION_LIMITS } from '../../webhook/create-webhook-server.js';
import { readPid } from '../sandbox/processes.js';
import { parsePrometheusText } from '../support/prometheus-text.js';
import { apply, connectNamespace, disconnectNamespace, getJson, kubectl, kubectlStdin, sandbox, uniqueName, waitFor } from './support.js';

/** The flooding client's address: another loopback address of this machine than the apiserver's 127.0.0.1. */
const FLOOD_ADDRESS = '127.0.0.2';
/** Idle connections the flood opens, half to each port. */
const FLOOD = 2000;
/** Dials in flight at once: the flood is bounded in rate too, as a test's load must be. */
const DIALS_IN_FLIGHT = 50;
/** One dial (TCP connect and TLS handshake) that takes longer than this is given up and counted as such. */
const DIAL_TIMEOUT_MS = 20_000;

/** What became of one dial of the flood. */
type Outcome = { held: tls.TLSSocket } | { closedByServer: string } | { timedOut: true };

/**
 * Opens one idle TLS connection from {@link FLOOD_ADDRESS} to 127.0.0.1:`port`, as a client
 * without a certificate would: TCP from the bound address, then the handshake on that socket
 * (tls.connect's own options have no local address). Resolves once the handshake ends (held),
 * or the server closed the connection first, or {@link DIAL_TIMEOUT_MS} passed.
 */
function dialIdle(port: number): Promise<Outcome> {
  return new Promise((resolve) => {
    let settled = false;
    const settle = (o: Outcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(o);
    };
    const raw = net.connect({ host: '127.0.0.1', port, localAddress: FLOOD_ADDRESS });
    const timer = setTimeout(() => {
      raw.destroy();
      settle({ timedOut: true });
    }, DIAL_TIMEOUT_MS);
    raw.once('error', (err: NodeJS.ErrnoException) => settle({ closedByServer: err.code ?? err.message }));
    raw.once('close', () => settle({ closedByServer: 'closed before the handshake' }));
    raw.once('connect', () => {
      // No client certificate; the server's is not checked (the kubelet API's is of the cluster
      // CA, the webhook's of the provider's own): only whether it keeps the connection matters.
      const socket = tls.connect({ socket: raw, rejectUnauthorized: false });
      socket.once('secureConnect', () => settle({ held: socket }));
      socket.on('error', (err: NodeJS.ErrnoException) => settle({ closedByServer: err.code ?? err.message }));
    });
  });
}

/** Dials one idle connection ({@link dialIdle}) per entry of `ports`, {@link DIALS_IN_FLIGHT} at a time; the outcomes by port. */
async function flood(ports: number[]): Promise<Map<number, Outcome[]>> {
  const queue = ports.slice();
  const out = new Map<number, Outcome[]>(ports.map((p) => [p, []]));
  const worker = async () => {
    for (let port = queue.shift(); port !== undefined; port = queue.shift()) out.get(port)!.push(await dialIdle(port));
  };
  await Promise.all(Array.from({ length: DIALS_IN_FLIGHT }, worker));
  return out;
}

/** The soft limit of open files of a process, from /proc. */
function openFilesLimit(pid: number | 'self'): number {
  const line = readFileSync(`/proc/${pid}/limits`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const soft = line?.split(/\s{2,}/)[1];
  return soft === 'unlimited' ? Infinity : Number(soft);
}

/** The pid of c1's provider process: the child of its restart loop, whose pid the sandbox records. */
function providerPid(): number {
  const [spec] = sandbox.specs('c1', 'provider');
  const loop = readPid(spec!.pidFile);
  if (loop === undefined) throw new Error("c1's provider has no pid file");
  const children = readFileSync(`/proc/${loop}/task/${loop}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  const provider = children.find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('provider'));
  if (provider === undefined) throw new Error(`c1's provider restart loop (pid ${loop}) runs no provider right now`);
  return provider;
}

/** One plain-HTTP GET of c1's provider's ops port (metrics and probes). */
function opsGet(path: string): Promise<{ status: number; body: string }> {
  return new Promise((res, rej) => {
    http
      .get({ host: '127.0.0.1', port: sandbox.ports('c1').metrics, path }, (r) => {
        let body = '';
        r.on('data', (c) => (body += c));
        r.on('end', () => res({ status: r.statusCode ?? 0, body }));
      })
      .on('error', rej);
  });
}

/** The webhook's count of connections it closed for `reason`, from the provider's metrics. */
async function webhookClosed(reason: string): Promise<number> {
  const { status, body } = await opsGet('/metrics');
  expect(status, 'metrics scrape').to.equal(200);
  const sample = parsePrometheusText(body).samples.find((s) => s.name === 'admiralty_webhook_connections_closed_total' && s.labels.reason === reason);
  return sample?.value ?? 0;
}

/** A CRI log line, as kwok reads them. */
const cri = (when: Date, text: string) => `${when.toISOString()} stdout F ${text}\n`;

/**
 * The per-address connection caps of the kubelet API and the webhook (README, Threat model):
 * one client address holding idle TLS connections gets no more than its cap, and the
 * apiserver's own calls into both servers (logs, exec, admission, the extender's binds and
 * metrics-server's scrapes) keep working meanwhile.
 */
describe('fair connection limits: 2000 idle TLS connections from 127.0.0.2 to the kubelet API and the webhook', function () {
  this.timeout(300_000);
  const ns = uniqueName('flood');
  const usage = `${ns}-usage`;
  let c2Node = '';
  const held: tls.TLSSocket[] = [];
  let outcomes = new Map<number, Outcome[]>();
  let kubeletPort = 0;
  let webhookPort = 0;
  /** When every dial of the flood had its outcome: the caps full from then on. */
  let floodFullMs = 0;
  /** Where c1's provider and metrics-server logs stood when the flood began. */
  let providerLogStart = 0;
  let metricsServerLogStart = 0;
  let webhookClosedBefore = 0;
  const providerLog = () => sandbox.specs('c1', 'provider')[0]!.logFile;
  const metricsServerLog = join(sandbox.dir, 'logs', 'c1-metrics-server.log');
  /** How many of the flood's connections to `port` are still open. */
  const stillHeld = (port: number) => held.filter((s) => s.remotePort === port && !s.destroyed && !s.closed).length;

  before(async function () {
    this.timeout(300_000);
    // The flood's sockets, in this process and (accepted, before they are closed) in the provider.
    const needed = FLOOD + 1024;
    const ours = openFilesLimit('self');
    const theirs = openFilesLimit(providerPid());
    expect(ours, `this process's open files limit (ulimit -n): ${FLOOD} connections need ${needed}; raise it (e.g. ulimit -n 65536) before the suite`).to.be.at.least(needed);
    expect(theirs, `c1's provider's open files limit: ${FLOOD} connections need ${needed}; raise ulimit -n before the sandbox starts`).to.be.at.least(needed);
    // 127.0.0.2 is on loopback (Linux routes all of 127.0.0.0/8 there): binding it must work.
    await new Promise<void>((res, rej) => {
      const probe = net.createServer().once('error', rej);
      probe.listen(0, FLOOD_ADDRESS, () => probe.close(() => res()));
    });

    ({ c2Node } = await connectNamespace(ns));
    ({ kubelet: kubeletPort, webhook: webhookPort } = sandbox.providerPorts('c1', 0));
    // A proxy whose delegate runs in c2, with logs and usage figures kwok makes up there.
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: web, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  nodeSelector: {topology.kubernetes.io/region: eu}\n  terminationGracePeriodSeconds: 0\n  containers: [{name: app, image: nginx, resources: {requests: {cpu: 100m}}}]\n`,
    );
    await waitFor('web Running', 90_000, async () => (await getJson('c1', 'pod', 'web', '-n', ns)).status?.phase === 'Running');
    const uid = (await getJson('c1', 'pod', 'web', '-n', ns)).metadata.uid;
    const [delegate] = (await getJson('c2', 'pods', '-n', ns, '-l', `multicluster.admiralty.io/parent-uid=${uid}`)).items;
    const logDir = join(sandbox.dir, 'c2', 'fake-logs');
    mkdirSync(logDir, { recursive: true });
    const logFile = join(logDir, `${ns}.log`);
    writeFileSync(logFile, cri(new Date(Date.now() - 2_000), 'before the flood') + cri(new Date(), 'still here'));
    await apply('c2', `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Logs\nmetadata: {name: ${delegate.metadata.name}, namespace: ${ns}}\nspec:\n  logs:\n  - logsFile: ${logFile}\n`);
    await apply(
      'c2',
      `apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterResourceUsage\nmetadata: {name: ${usage}}\nspec:\n  selector: {matchNamespaces: [${ns}]}\n  usages:\n  - usage: {cpu: {value: 20m}, memory: {value: 20Mi}}\n`,
    );
    // The virtual node has figures in c1's metrics API before the flood (two scrapes on each side).
    await waitFor(`figures for ${c2Node} in c1's metrics API`, 150_000, async () => (await kubectl('c1', 'get', '--raw', `/apis/metrics.k8s.io/v1beta1/nodes/${c2Node}`).catch(() => '')) !== '');
    // The logs answer before the flood, so that a failure under it is the flood's doing.
    expect(await kubectl('c1', 'logs', 'web', '-n', ns)).to.equal('before the flood\nstill here\n');

    providerLogStart = statSync(providerLog()).size;
    metricsServerLogStart = statSync(metricsServerLog).size;
    webhookClosedBefore = await webhookClosed('connection_limit_per_address');
    outcomes = await flood(Array.from({ length: FLOOD }, (_, i) => (i % 2 === 0 ? kubeletPort : webhookPort)));
    floodFullMs = Date.now();
    for (const list of outcomes.values()) for (const o of list) if ('held' in o) held.push(o.held);
    const summary = [...outcomes].map(([port, list]) => {
      const closed = list.filter((o) => 'closedByServer' in o) as { closedByServer: string }[];
      const why = [...new Set(closed.map((o) => o.closedByServer))].join('/');
      return `port ${port}: ${list.filter((o) => 'held' in o).length} held, ${closed.length} closed by the server (${why || 'none'}), ${list.filter((o) => 'timedOut' in o).length} timed out`;
    });
    console.log(`      flood: ${summary.join('; ')}`);
  });

  after(async function () {
    this.timeout(120_000);
    for (const s of held) s.destroy();
    await disconnectNamespace(ns);
    await kubectl('c2', 'delete', 'clusterresourceusage', usage, '--ignore-not-found');
  });

  /** The flood is still on: every connection the caps let in is open (a check run after the servers closed them proves nothing). */
  const expectFloodHeld = (when: string) => {
    expect(stillHeld(kubeletPort), `flood connections open on the kubelet API ${when}`).to.equal(DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress);
    expect(stillHeld(webhookPort), `flood connections open on the webhook ${when}`).to.equal(WEBHOOK_CONNECTION_LIMITS.maxConnectionsPerAddress);
  };

  it('holds exactly the per-address cap on each server (64 on the kubelet API, 640 on the webhook) and closes every connection beyond it, each counted by the server', async () => {
    const perPort = FLOOD / 2;
    for (const [port, cap] of [
      [kubeletPort, DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress],
      [webhookPort, WEBHOOK_CONNECTION_LIMITS.maxConnectionsPerAddress],
    ] as const) {
      const list = outcomes.get(port)!;
      expect(list, `dials to ${port}`).to.have.length(perPort);
      expect(list.filter((o) => 'timedOut' in o).length, `dials to ${port} left unanswered`).to.equal(0);
      expect(list.filter((o) => 'held' in o).length, `connections to ${port} the server kept`).to.equal(cap);
      expect(list.filter((o) => 'closedByServer' in o).length, `connections to ${port} the server closed`).to.equal(perPort - cap);
    }
    expectFloodHeld('after the flood');
    // The servers' own word: the webhook counts each refusal by reason, the kubelet API logs
    // each with the address (a metric label must stay bounded, so no address there).
    expect((await webhookClosed('connection_limit_per_address')) - webhookClosedBefore, 'webhook refusals counted by the provider').to.equal(
      FLOOD / 2 - WEBHOOK_CONNECTION_LIMITS.maxConnectionsPerAddress,
    );
    const refusals = () =>
      readFileSync(providerLog())
        .subarray(providerLogStart)
        .toString('utf8')
        .split('\n')
        .filter((l) => l.includes('"kubelet API connection closed by the server"'))
        .map((l) => JSON.parse(l));
    await waitFor('the kubelet API refusals in the provider log', 10_000, () => refusals().length >= FLOOD / 2 - DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress);
    const logged = refusals();
    expect(logged.length, 'kubelet API refusals logged').to.equal(FLOOD / 2 - DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress);
    expect(new Set(logged.map((l) => `${l.reason} ${l.address} ${l.maxConnectionsPerAddress}`))).to.deep.equal(
      new Set([`connection_limit_per_address ${FLOOD_ADDRESS} ${DEFAULT_CONNECTION_LIMITS.maxConnectionsPerAddress}`]),
    );
  });

  it('answers /healthz on both ports to a new connection from 127.0.0.1 without a client certificate', async () => {
    // What the issue saw fail with a TLS reset: another address's first connection while one
    // address holds idle ones. A new connection each, so no pooled one of before the flood.
    for (const port of [kubeletPort, webhookPort]) {
      const answer = await new Promise<{ status: number; body: string }>((res, rej) => {
        https
          // Who serves does not matter here (the webhook's certificate is of the provider's own CA).
          .get({ host: '127.0.0.1', port, path: '/healthz', localAddress: '127.0.0.1', agent: false, rejectUnauthorized: false }, (r) => {
            let body = '';
            r.on('data', (c) => (body += c));
            r.on('end', () => res({ status: r.statusCode ?? 0, body }));
          })
          .on('error', rej);
      });
      expect(answer, `/healthz on ${port}`).to.deep.equal({ status: 200, body: 'ok' });
    }
    expectFloodHeld('after /healthz');
  });

  it('kubectl logs and kubectl exec of a proxy through c1 still answer, as before the flood', async () => {
    expect(await kubectl('c1', 'logs', 'web', '-n', ns)).to.equal('before the flood\nstill here\n');
    expect(await kubectl('c1', 'logs', 'web', '-n', ns, '--tail=1')).to.equal('still here\n');
    expect(await kubectl('c1', 'exec', 'web', '-n', ns, '--', 'sh', '-c', 'echo "exec on $SANDBOX_CLUSTER"')).to.equal('exec on c2\n');
    const failed = await kubectlStdin('c1', '', 'exec', 'web', '-n', ns, '--', 'sh', '-c', 'exit 3');
    expect(failed.code, "a failing command's exit, passed through").to.not.equal(0);
    expectFloodHeld('after logs and exec');
  });

  it('admits an elected pod (the webhook mutates it) and the proxy scheduler places it through the extender, to Running with its delegate', async () => {
    await apply(
      'c1',
      `apiVersion: v1\nkind: Pod\nmetadata: {name: admitted, namespace: ${ns}, annotations: {multicluster.admiralty.io/elect: ""}}\nspec:\n  terminationGracePeriodSeconds: 0\n  containers: [{name: app, image: nginx}]\n`,
    );
    const pod = await getJson('c1', 'pod', 'admitted', '-n', ns);
    expect(pod.metadata.annotations, 'what the webhook writes').to.have.property(SOURCE_POD_MANIFEST_ANNOTATION);
    expect(pod.spec.schedulerName).to.equal('admiralty-proxy');
    await waitFor('admitted Running', 90_000, async () => (await getJson('c1', 'pod', 'admitted', '-n', ns)).status?.phase === 'Running');
    expectFloodHeld('after the admission and the bind');
  });

  it("c1's metrics-server scrapes the virtual node meanwhile, with no scrape error, and the provider's metrics answer", async () => {
    // The node's sample is timed by the provider when a scrape asks for it: one timed after the
    // flood filled the caps is a scrape that got through it (metrics-server scrapes every 10 s).
    let stamp = '';
    await waitFor(`a sample of ${c2Node} taken during the flood`, 60_000, async () => {
      const raw = await kubectl('c1', 'get', '--raw', `/apis/metrics.k8s.io/v1beta1/nodes/${c2Node}`).catch(() => '');
      stamp = raw ? JSON.parse(raw).timestamp : '';
      return stamp !== '' && Date.parse(stamp) > floodFullMs;
    });
    console.log(
      `      ${c2Node}: sample at ${stamp}, ${((Date.parse(stamp) - floodFullMs) / 1000).toFixed(1)} s after the flood filled the caps, read ${((Date.now() - floodFullMs) / 1000).toFixed(1)} s after`,
    );
    const errors = readFileSync(metricsServerLog)
      .subarray(metricsServerLogStart)
      .toString('utf8')
      .split('\n')
      .filter((l) => l.includes('Failed to scrape node') && l.includes(`node="${c2Node}"`));
    expect(errors, "c1's metrics-server scrape errors of the virtual node").to.deep.equal([]);
    const ops = await opsGet('/metrics');
    expect(ops.status).to.equal(200);
    expect(parsePrometheusText(ops.body).samples.some((s) => s.name === 'admiralty_controller_reconcile_total')).to.equal(true);
    expectFloodHeld('after the scrapes');
  });
});
