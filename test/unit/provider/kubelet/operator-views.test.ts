import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { expect } from 'chai';
import { silentLogger } from '../../../../provider/core/logger.js';
import type { KubeletAuthorizer, KubeletRequestAttributes, KubeletUser } from '../../../../provider/kubelet/auth.js';
import { createKubeletServer, type KubeletServer } from '../../../../provider/kubelet/kubelet-server.js';
import { parseOperatorPath, type OperatorViews } from '../../../../provider/kubelet/operator-views.js';
import { makeTlsFixtures } from './tls-fixtures.js';

const tls = makeTlsFixtures();

function get(port: number, path: string, headers: Record<string, string | string[]>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    https
      .get({ host: '127.0.0.1', port, path, ca: tls.ca.certPem, headers }, (res) => {
        let body = '';
        res.on('data', (c) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on('error', reject);
  });
}

/** Token `good` is user `admin`; allows what `allowed` says, by `verb resource name`. */
class FakeAuth implements KubeletAuthorizer {
  seen: Array<{ user: KubeletUser; attrs: KubeletRequestAttributes }> = [];
  constructor(private readonly allowed: (user: KubeletUser, attrs: KubeletRequestAttributes) => boolean) {}
  async authenticate(req: IncomingMessage) {
    return req.headers.authorization === 'Bearer good' ? { name: 'admin', groups: ['admins'] } : null;
  }
  async authorize(user: KubeletUser, attrs: KubeletRequestAttributes) {
    this.seen.push({ user, attrs });
    return this.allowed(user, attrs);
  }
}

describe('kubelet server: operator views', () => {
  it('parses /admiralty/summary/<node> and /admiralty/explain/<namespace>/<pod>, nothing else', () => {
    expect(parseOperatorPath('/admiralty/summary/admiralty-cluster-c2')).to.deep.equal({ view: 'summary', node: 'admiralty-cluster-c2' });
    expect(parseOperatorPath('/admiralty/explain/ns/web-0')).to.deep.equal({ view: 'explain', namespace: 'ns', pod: 'web-0' });
    for (const bad of [
      '/admiralty/explain/ns',
      '/admiralty/explain/ns/p/x',
      '/admiralty/summary/',
      '/admiralty/explain/NS/p',
      '/admiralty/explain/ns/%2e%2e',
      '/other/summary/n',
      '/admiralty/explain/ns/%E0',
    ]) {
      expect(parseOperatorPath(bad), bad).to.equal(null);
    }
  });

  let server: KubeletServer | undefined;
  let port: number;
  let auth: FakeAuth;
  const asked: string[] = [];
  const views: OperatorViews = {
    summaryAttributes: (node) => (node === 'admiralty-namespace-ns-c2' ? { verb: 'get', group: 'multicluster.admiralty.io', resource: 'targets', namespace: 'ns', name: 'c2' } : null),
    summary: async (node) => (asked.push(`summary ${node}`), { code: 200, body: { node, target: 'ns/c2', ready: true, reason: 'TargetReady', message: '', summary: null } }),
    explain: async (namespace, pod) => (asked.push(`explain ${namespace}/${pod}`), { code: 200, body: { pod: `${namespace}/${pod}`, phase: 'Pending', targets: [], best: [] } }),
  };
  const start = async (allowed: (user: KubeletUser, attrs: KubeletRequestAttributes) => boolean) => {
    auth = new FakeAuth(allowed);
    asked.length = 0;
    server = createKubeletServer({
      host: '127.0.0.1',
      port: 0,
      tls: { certPem: tls.server.certPem, keyPem: tls.server.keyPem },
      resolver: { resolve: async () => null },
      nodeUsage: { nodeUsage: async () => null },
      auth,
      logger: silentLogger(),
      operatorViews: views,
    });
    port = await server!.listen();
  };
  afterEach(async () => {
    await server?.close();
    server = undefined;
  });

  it('explains a pod to a caller allowed to get it, authorized on the pod itself', async () => {
    await start(() => true);
    const r = await get(port, '/admiralty/explain/ns/web', { Authorization: 'Bearer good' });
    expect(r.status).to.equal(200);
    expect(JSON.parse(r.body)).to.deep.include({ pod: 'ns/web' });
    expect(auth.seen.map((s) => s.attrs)).to.deep.equal([{ verb: 'get', resource: 'pods', namespace: 'ns', name: 'web' }]);
  });

  it('refuses with 403 naming the pod a caller who may not get it, and asks the views nothing', async () => {
    await start(() => false);
    const r = await get(port, '/admiralty/explain/ns/web', { Authorization: 'Bearer good' });
    expect(r).to.deep.equal({ status: 403, body: 'Forbidden (user=admin, verb=get, resource=pods, namespace=ns, name=web)' });
    expect(asked).to.deep.equal([]);
  });

  it('answers 400 to a request target the URL parser refuses, and asks the views nothing', async () => {
    await start(() => true);
    // An absolute-form target whose port is past 65535: express routes it by its path, which the
    // URL parser then refuses (it once made a 500).
    expect(await get(port, 'http://x:99999/admiralty/explain/ns/web-0', { Authorization: 'Bearer good' })).to.deep.equal({ status: 400, body: 'malformed request target' });
    expect(asked).to.deep.equal([]);
    expect(auth.seen).to.deep.equal([]);
  });

  it('answers 401 without credentials', async () => {
    await start(() => true);
    expect((await get(port, '/admiralty/explain/ns/web', {})).status).to.equal(401);
  });

  it("shows a target's summary to a caller allowed to get the Target, and 404 for a node not ours", async () => {
    await start((_u, a) => a.resource === 'targets');
    const r = await get(port, '/admiralty/summary/admiralty-namespace-ns-c2', { Authorization: 'Bearer good' });
    expect(r.status).to.equal(200);
    expect(auth.seen[0]!.attrs).to.deep.equal({ verb: 'get', group: 'multicluster.admiralty.io', resource: 'targets', namespace: 'ns', name: 'c2' });
    expect((await get(port, '/admiralty/summary/c2-node-0', { Authorization: 'Bearer good' })).status).to.equal(404);
  });

  it('acts as the impersonated user and groups once the caller may impersonate each, with system:authenticated added', async () => {
    await start((u, a) => (a.verb === 'impersonate' ? u.name === 'admin' : u.name === 'reader'));
    const r = await get(port, '/admiralty/explain/ns/web', { Authorization: 'Bearer good', 'Impersonate-User': 'reader', 'Impersonate-Group': ['team-a', 'team-b'] });
    expect(r.status).to.equal(200);
    expect(auth.seen.map((s) => [s.user.name, s.attrs.verb, s.attrs.resource, s.attrs.name])).to.deep.equal([
      ['admin', 'impersonate', 'users', 'reader'],
      ['admin', 'impersonate', 'groups', 'team-a'],
      ['admin', 'impersonate', 'groups', 'team-b'],
      ['reader', 'get', 'pods', 'web'],
    ]);
    expect(auth.seen[3]!.user.groups).to.deep.equal(['team-a', 'team-b', 'system:authenticated']);
  });

  it('refuses a caller who may not impersonate (403), and impersonation of a uid or extras it does not honour (400)', async () => {
    await start((_u, a) => a.verb !== 'impersonate');
    const denied = await get(port, '/admiralty/explain/ns/web', { Authorization: 'Bearer good', 'Impersonate-User': 'reader' });
    expect(denied).to.deep.equal({ status: 403, body: 'Forbidden (user=admin, verb=impersonate, resource=users, name=reader)' });
    const uid = await get(port, '/admiralty/explain/ns/web', { Authorization: 'Bearer good', 'Impersonate-User': 'reader', 'Impersonate-Uid': '42' });
    expect(uid.status).to.equal(400);
    expect(uid.body).to.match(/^unsupported impersonation header\(s\) impersonate-uid/);
    expect(asked).to.deep.equal([]);
  });
});
