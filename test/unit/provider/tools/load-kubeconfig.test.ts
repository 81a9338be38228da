import { expect } from 'chai';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { ValidationError } from '../../../../provider/core/errors.js';
import { loadKubeconfig } from '../../../../provider/tools/load-kubeconfig.js';

const config = (current: string | undefined, ...names: string[]) =>
  [
    'apiVersion: v1',
    'kind: Config',
    `clusters: [${names.map((n) => `{name: ${n}, cluster: {server: "https://${n}.example:6443"}}`).join(', ')}]`,
    `users: [${names.map((n) => `{name: ${n}, user: {token: t-${n}}}`).join(', ')}]`,
    `contexts: [${names.map((n) => `{name: ${n}, context: {cluster: ${n}, user: ${n}}}`).join(', ')}]`,
    current ? `current-context: ${current}` : '',
    '',
  ].join('\n');

describe('loadKubeconfig', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'load-kubeconfig-'));
    writeFileSync(join(dir, 'a'), config('a1', 'a1', 'a2', 'shared'));
    writeFileSync(join(dir, 'b'), config('b1', 'b1', 'shared'));
    writeFileSync(join(dir, 'nocurrent'), config(undefined, 'x'));
    mkdirSync(join(dir, 'home', '.kube'), { recursive: true });
    writeFileSync(join(dir, 'home', '.kube', 'config'), config('h', 'h'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('reads --kubeconfig and its current context', () => {
    const { kc, context, source } = loadKubeconfig({ kubeconfig: join(dir, 'a'), env: { KUBECONFIG: join(dir, 'b') } });
    expect(context).to.equal('a1');
    expect(source).to.equal(join(dir, 'a'));
    expect(kc.getCurrentCluster()?.server).to.equal('https://a1.example:6443');
  });

  it('selects --context', () => {
    const { kc, context } = loadKubeconfig({ kubeconfig: join(dir, 'a'), context: 'a2' });
    expect(context).to.equal('a2');
    expect(kc.getCurrentUser()?.token).to.equal('t-a2');
  });

  it('merges the files of KUBECONFIG, the first one to name something winning, as kubectl', () => {
    const { kc, context } = loadKubeconfig({ env: { KUBECONFIG: [join(dir, 'nocurrent'), join(dir, 'a'), join(dir, 'b')].join(delimiter), HOME: join(dir, 'home') } });
    expect(context).to.equal('a1');
    expect(kc.getContexts().map((c) => c.name)).to.have.members(['x', 'a1', 'a2', 'shared', 'b1']);
    kc.setCurrentContext('shared');
    expect(kc.getCurrentCluster()?.server).to.equal('https://shared.example:6443');
  });

  it('falls back to ~/.kube/config', () => {
    expect(loadKubeconfig({ env: { HOME: join(dir, 'home') } }).context).to.equal('h');
  });

  it("uses the pod's ServiceAccount when there is no kubeconfig and the pod's environment says where the API is", () => {
    const sa = join(dir, 'sa');
    mkdirSync(sa, { recursive: true });
    writeFileSync(join(sa, 'token'), 'sa-token');
    const env = { HOME: join(tmpdir(), 'no-such-home-for-tests'), KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
    const { kc, context, source } = loadKubeconfig({ env, serviceAccountDir: sa });
    expect(source).to.equal(`the pod's ServiceAccount (${sa})`);
    expect(context).to.equal('loaded-context');
    expect(kc.getCurrentCluster()).to.include({ server: 'https://10.96.0.1:443', caFile: join(sa, 'ca.crt') });
    expect(kc.getCurrentUser()?.authProvider?.config?.tokenFile).to.equal(join(sa, 'token'));
    expect(loadKubeconfig({ env: { ...env, KUBERNETES_SERVICE_HOST: 'fd00::1' }, serviceAccountDir: sa }).kc.getCurrentCluster()?.server).to.equal('https://[fd00::1]:443');
    // Without a token there (not in a pod), the usual message.
    expect(() => loadKubeconfig({ env, serviceAccountDir: join(dir, 'no-sa') })).to.throw(ValidationError, /no kubeconfig found/);
  });

  const failures: [string, Parameters<typeof loadKubeconfig>[0], RegExp][] = [
    ['no kubeconfig anywhere', { env: { HOME: join(tmpdir(), 'no-such-home-for-tests') } }, /no kubeconfig found/],
    ['a missing file', { kubeconfig: join(tmpdir(), 'no-such-kubeconfig-for-tests') }, /does not exist/],
    ['a missing file in KUBECONFIG', { env: { KUBECONFIG: join(tmpdir(), 'no-such-kubeconfig-for-tests') } }, /from \$KUBECONFIG\) does not exist/],
    ['an unknown context', { kubeconfig: 'PLACEHOLDER', context: 'zz' }, /context zz not found .*\(contexts: a1, a2, shared\)/],
  ];
  for (const [why, opts, message] of failures) {
    it(`throws a ValidationError on ${why}`, () => {
      const o = opts.kubeconfig === 'PLACEHOLDER' ? { ...opts, kubeconfig: join(dir, 'a') } : opts;
      expect(() => loadKubeconfig(o)).to.throw(ValidationError, message);
    });
  }

  it('throws a ValidationError when no context is current and none is given', () => {
    expect(() => loadKubeconfig({ kubeconfig: join(dir, 'nocurrent') })).to.throw(ValidationError, /no current context: pass --context/);
  });
});
