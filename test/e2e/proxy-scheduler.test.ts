import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import { ensurePki } from '../sandbox/pki.js';
import { isRunning } from '../sandbox/processes.js';
import { h2Connect } from '../support/h2.js';
import { apply, connectNamespace, disconnectNamespace, electedDeployment, getJson, kubectl, providerCounter, running, sandbox, uniqueName, waitFor } from './support.js';

/**
 * The second kube-scheduler (schedulerName admiralty-proxy) of the source, c1, run on the
 * shipped manifests/scheduler/config.yaml as ServiceAccount admiralty-proxy-scheduler. Its RBAC
 * is proven by the audit check of the root hooks (no 403 for that identity).
 */
/** Status code of a GET on the proxy scheduler's secure port (its certificate is self-signed). */
function getStatus(path: string, auth: { cert?: Buffer; key?: Buffer; token?: string }): Promise<number> {
  return new Promise((res, rej) => {
    const headers = auth.token ? { authorization: `Bearer ${auth.token}` } : undefined;
    https
      .get(`https://127.0.0.1:${sandbox.ports('c1').proxyScheduler}${path}`, { rejectUnauthorized: false, cert: auth.cert, key: auth.key, headers, timeout: 5000 }, (r) => {
        r.resume();
        res(r.statusCode ?? 0);
      })
      .on('error', rej);
  });
}

/** Status and body of a POST to the provider's webhook server of c1 (its certificate is not checked here). */
function postToWebhookServer(path: string, body: string, client: { cert?: Buffer; key?: Buffer }): Promise<{ status: number; body: string }> {
  return new Promise((res, rej) => {
    const req = https.request(
      {
        host: '127.0.0.1',
        port: sandbox.ports('c1').webhook,
        path,
        method: 'POST',
        rejectUnauthorized: false,
        cert: client.cert,
        key: client.key,
        agent: false,
        timeout: 5000,
        headers: { 'content-type': 'application/json' },
      },
      (r) => {
        let text = '';
        r.on('data', (d) => (text += d));
        r.on('end', () => res({ status: r.statusCode ?? 0, body: text }));
      },
    );
    req.on('error', rej);
    req.end(body);
  });
}

const webhookConnections = () => providerCounter('admiralty_webhook_connections_total', 'protocol');
const bodiesRefused = () => providerCounter('admiralty_webhook_bodies_refused_total', 'reason');

describe('proxy scheduler (c1)', function () {
  this.timeout(90_000);

  it('runs, and holds its Lease admiralty/admiralty-proxy-scheduler', async () => {
    expect(isRunning(sandbox.spec('c1', 'proxy-scheduler')), 'c1 proxy-scheduler process').to.equal(true);
    // Leader election renews every 2 s (retryPeriod) once acquired; a new process may need one leaseDuration (15 s).
    await waitFor('a holder of Lease admiralty-proxy-scheduler, renewed lately', 30_000, async () => {
      const lease = await getJson('c1', 'lease', 'admiralty-proxy-scheduler', '-n', 'admiralty').catch(() => undefined);
      const renewed = Date.parse(lease?.spec?.renewTime ?? '');
      return !!lease?.spec?.holderIdentity && Date.now() - renewed < 20_000;
    });
  });

  it('delegates authentication and authorization of its secure port to the apiserver, as its own identity', async () => {
    const pki = ensurePki(join(sandbox.dir, 'pki'));
    expect(await getStatus('/healthz', {}), 'health checks are open').to.equal(200);
    // Client certificate (CA from kube-system/extension-apiserver-authentication), then a
    // SubjectAccessReview: the admin may read /metrics.
    expect(await getStatus('/metrics', { cert: readFileSync(pki.adminCert), key: readFileSync(pki.adminKey) })).to.equal(200);
    // A token (TokenReview), then a SubjectAccessReview: the provider may not.
    const token = (await kubectl('c1', 'create', 'token', 'admiralty', '-n', 'admiralty', '--duration=10m')).trim();
    expect(await getStatus('/metrics', { token })).to.equal(403);
  });

  it("reaches the provider's webhook server over TLS it verifies (serverName and CA of the sandbox)", async () => {
    // A plain pod (its namespace is not opted in, so the webhook leaves it alone) that asks for
    // the proxy scheduler: the c1 fake nodes pass the stock filters, so the extender is called.
    const ns = uniqueName('proxy-sched');
    await kubectl('c1', 'create', 'namespace', ns);
    try {
      await apply('c1', `apiVersion: v1\nkind: Pod\nmetadata: {name: p, namespace: ${ns}}\nspec:\n  schedulerName: admiralty-proxy\n  containers: [{name: app, image: busybox}]\n`);
      let outcome = '';
      await waitFor('the proxy scheduler to bind the pod or report why not', 60_000, async () => {
        const pod = await getJson('c1', 'pod', 'p', '-n', ns);
        if (pod.spec.nodeName) {
          outcome = `bound to ${pod.spec.nodeName}`;
          return true;
        }
        const events = await getJson('c1', 'events', '-n', ns, '--field-selector', 'involvedObject.name=p,reason=FailedScheduling');
        outcome = events.items.map((e: { message: string }) => e.message).join('\n');
        return outcome !== '';
      });
      console.log(`      ${outcome.split('\n')[0]}`);
      // The extender filtered the pod and its bind refused it (a real node is no target): the
      // answer came over TLS. A TLS or connection failure would name the certificate or the dial.
      expect(outcome).not.to.match(/x509|certificate|tls:|connection refused|no such host|dial tcp/i);
      expect(outcome).to.match(/binds proxies to virtual nodes only/);
    } finally {
      await kubectl('c1', 'delete', 'namespace', ns, '--wait=false');
    }
  });

  it('and the apiserver call the webhook server over HTTP/2: a few connections for many calls, not one per bind in flight', async () => {
    const ns = uniqueName('h2');
    await connectNamespace(ns);
    try {
      const before = await webhookConnections();
      // Binds wait until c2 has placed the delegate, so kube-scheduler has several in flight: over
      // HTTP/1.1 each took a connection of its own (Go keeps 2 idle per host).
      await apply('c1', electedDeployment('burst', ns, 12, '10m', { spec: { nodeSelector: { 'topology.kubernetes.io/region': 'eu' } } }));
      await running(ns, 'burst', 12);
      const after = await webhookConnections();
      const opened = (protocol: string) => (after[protocol] ?? 0) - (before[protocol] ?? 0);
      console.log(`      webhook connections opened: h2 ${opened('h2')}, http/1.1 ${opened('http/1.1')}; since start: ${JSON.stringify(after)}`);
      expect(after.h2 ?? 0, 'HTTP/2 connections since the provider started').to.be.greaterThan(0);
      expect(opened('http/1.1'), 'HTTP/1.1 connections while 12 pods were admitted and bound').to.equal(0);
      // Two clients; a reconnect each at most (an idle connection closed meanwhile).
      expect(opened('h2'), 'HTTP/2 connections while 12 pods were admitted and bound').to.be.at.most(4);
    } finally {
      await disconnectNamespace(ns);
    }
  });

  it('holds at most its budget of request bodies from one HTTP/2 connection, answers the rest 503, and admits pods meanwhile', async () => {
    const ns = uniqueName('budget');
    await connectNamespace(ns);
    const before = await bodiesRefused();
    // Anyone who reaches the port may call /mutate. Ten bodies of 7 MiB, each under the route's
    // limit, none ended: 70 MiB on one connection, past its 64 MiB.
    const session = await h2Connect(sandbox.ports('c1').webhook, { rejectUnauthorized: false });
    try {
      const chunk = Buffer.alloc(7 * 2 ** 20, 0x20);
      const answers = Array.from({ length: 10 }, () => {
        const stream = session.request({ ':method': 'POST', ':path': '/mutate', 'content-type': 'application/json' });
        stream.on('error', () => undefined);
        stream.write(chunk);
        return new Promise<{ status: number; body: string }>((res) => {
          let status = 0;
          let body = '';
          stream.on('response', (h) => (status = Number(h[':status'])));
          stream.on('data', (d: Buffer) => (body += d.toString()));
          stream.on('end', () => res({ status, body }));
          stream.on('close', () => res({ status, body }));
        });
      });
      const refused = await Promise.race([
        Promise.any(answers.map((a) => a.then((r) => (r.status === 503 ? r : Promise.reject(new Error(`${r.status}`)))))),
        new Promise<undefined>((r) => setTimeout(r, 30_000)),
      ]);
      expect(refused, 'a 503 for the body past the budget').to.not.equal(undefined);
      expect(refused!.body).to.match(/this connection/);
      // While those bodies are held, the apiserver's own admission calls go through.
      const pod = JSON.parse(await kubectl('c1', 'run', 'p', '-n', ns, '--image=busybox', '--dry-run=server', '-o', 'json', '--annotations=multicluster.admiralty.io/elect='));
      expect(pod.spec.schedulerName, 'the dry-run pod went through the webhook').to.equal('admiralty-proxy');
    } finally {
      session.destroy();
      await disconnectNamespace(ns);
    }
    const after = await bodiesRefused();
    expect((after.connection_budget ?? 0) - (before.connection_budget ?? 0), 'refusals counted as connection_budget').to.be.at.least(1);
  });

  it("refuses extender calls that do not carry the proxy scheduler's client certificate", async () => {
    const pki = ensurePki(join(sandbox.dir, 'pki'));
    const binding = JSON.stringify({ PodName: 'nobody', PodNamespace: 'default', PodUID: '00000000-0000-0000-0000-000000000000', Node: 'admiralty-namespace-default-c2' });
    const filter = JSON.stringify({ Pod: { metadata: { name: 'nobody', namespace: 'default' }, spec: { containers: [] } }, NodeNames: ['admiralty-namespace-default-c2'] });
    for (const [verb, body] of [
      ['bind', binding],
      ['filter', filter],
    ] as const) {
      const anonymous = await postToWebhookServer(`/scheduler/${verb}`, body, {});
      expect(anonymous.status, `${verb} without a certificate`).to.equal(401);
      expect(anonymous.body).to.match(/requires a client certificate/);
      // The cluster admin's certificate is valid for the apiserver, not for the extender: another CA.
      const admin = await postToWebhookServer(`/scheduler/${verb}`, body, { cert: readFileSync(pki.adminCert), key: readFileSync(pki.adminKey) });
      expect(admin.status, `${verb} with a certificate of another CA`).to.equal(401);
    }
    // The scheduler's own certificate (the files it was started with) is let through.
    const dir = join(sandbox.dir, 'c1', 'proxy-scheduler');
    const own = await postToWebhookServer('/scheduler/filter', filter, { cert: readFileSync(join(dir, 'client.crt')), key: readFileSync(join(dir, 'client.key')) });
    expect(own.status).to.equal(200);
  });
});
