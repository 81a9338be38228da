import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { COMMANDS, runCli } from '../../../provider/cli.js';
import { packageRoot } from '../../../provider/tools/package-root.js';

/** Runs one command line in-process and keeps what it wrote. */
async function run(...argv: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const code = await runCli(argv, { stdout: { write: (t: string) => (out += t) }, stderr: { write: (t: string) => (err += t) }, env: {} });
  return { code, out, err };
}

describe('admiralty CLI dispatch', () => {
  it('lists every command on --help, -h and with no command, exit 0', async () => {
    for (const argv of [[], ['--help'], ['-h'], ['help']]) {
      const { code, out, err } = await run(...argv);
      expect(code, argv.join(' ')).to.equal(0);
      expect(err).to.equal('');
      for (const [name] of COMMANDS) expect(out).to.match(new RegExp(`^  ${name} `, 'm'));
    }
    expect(COMMANDS.map(([name]) => name)).to.include.members(['provider', 'status', 'explain', 'export-kubeconfig', 'cleanup', 'demo', 'sandbox', 'bench', 'version']);
  });

  it('answers an unknown command with the usage on stderr and exit 2', async () => {
    const { code, out, err } = await run('frobnicate');
    expect(code).to.equal(2);
    expect(out).to.equal('');
    expect(err).to.contain('unknown command "frobnicate"').and.contain('usage: admiralty <command>');
  });

  it('prints the version of package.json', async () => {
    const { version } = JSON.parse(readFileSync(`${packageRoot()}/package.json`, 'utf8')) as { version: string };
    expect((await run('version')).out).to.equal(`${version}\n`);
    expect((await run('--version')).out).to.equal(`${version}\n`);
  });

  it('gives each command its own --help on stdout, exit 0', async () => {
    const expected: Record<string, string> = {
      provider: 'usage: admiralty provider',
      'export-kubeconfig': 'usage: admiralty export-kubeconfig',
      cleanup: 'usage: admiralty cleanup',
      kueue: 'usage: admiralty kueue setup',
      demo: 'usage: admiralty demo',
      bench: 'usage: admiralty bench',
    };
    for (const [name, head] of Object.entries(expected)) {
      const { code, out } = await run(name, '--help');
      expect(code, name).to.equal(0);
      expect(out, name).to.contain(head);
    }
  });
});
