import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { kueueCli } from '../../../../provider/tools/kueue.js';

/** Runs `kueue …` in-process and keeps what it wrote. */
async function run(...args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await kueueCli(args, { stdout: { write: (t: string) => (out += t) }, stderr: { write: (t: string) => (err += t) }, env: {} });
  return { code, out, err };
}

describe('tools: kueue setup flags', () => {
  let dir: string;
  let kubeconfig: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'kueue-cli-'));
    kubeconfig = join(dir, 'config');
    // A cluster nothing listens on: a flag refused before any read never dials it.
    writeFileSync(
      kubeconfig,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\nusers: [{name: u, user: {token: t}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\ncurrent-context: c\n',
    );
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('prints its usage on --help, exit 0, and says what the default quotas and order are', async () => {
    const { code, out } = await run('--help');
    expect(code).to.equal(0);
    expect(out).to.contain('usage: admiralty kueue setup').and.contain("Default: each target's capacity now").and.contain('by spec.placement.priority');
  });

  it('refuses no subcommand, or another, with exit 2', async () => {
    expect((await run()).code).to.equal(2);
    const other = await run('teardown');
    expect(other.code).to.equal(2);
    expect(other.err).to.contain('unknown subcommand "teardown"');
  });

  const bad: [string[], string][] = [
    [['--quota', 'cpu=lots'], 'kueue setup: --quota: cpu="lots" is not a quantity'],
    [['--quota', 'cpu'], 'kueue setup: --quota "cpu": write RESOURCE=QUANTITY'],
    [['--cluster-queue', 'My_Queue'], 'kueue setup: --cluster-queue "My_Queue": must be a DNS-1123 label'],
    [['--local-queue', 'a/b/c'], 'kueue setup: --local-queue a/b/c: write NAMESPACE/NAME or NAME'],
    [['--preemption', 'Always'], 'kueue setup: --preemption Always: one of Never, LowerPriority, LowerOrNewerEqualPriority'],
    [['--namespace-selector', 'a=b=c'], 'kueue setup: --namespace-selector "a=b=c": cannot read'],
    [['--targets', ','], 'kueue setup: --targets is empty'],
    [['--dry-run'], 'kueue setup: --dry-run goes with --apply'],
    [['-o', 'wide'], 'kueue setup: -o wide: yaml or json'],
  ];
  for (const [args, message] of bad) {
    it(`refuses ${args.join(' ')} with exit 2 before reading the cluster`, async () => {
      const { code, out, err } = await run('setup', '--kubeconfig', kubeconfig, ...args);
      expect(code).to.equal(2);
      expect(out).to.equal('');
      expect(err).to.contain(message);
    });
  }

  it('says which read failed, with exit 1, when the cluster cannot be reached', async () => {
    const { code, err } = await run('setup', '--kubeconfig', kubeconfig, '--quota', 'cpu=1');
    expect(code).to.equal(1);
    expect(err).to.match(/^kueue setup: cannot list Targets in all namespaces: /);
  });
});
