import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Sandbox, type SandboxState } from '../../sandbox/sandbox.js';

describe('Sandbox providerArgs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'sandbox-args-'));
  after(() => rmSync(dir, { recursive: true, force: true }));
  const state = (extra: Partial<SandboxState> = {}): SandboxState => ({ basePort: 30000, clusters: ['c1', 'c2'], binDir: dir, kwokModuleDir: dir, provider: true, ...extra });
  const level = (s: SandboxState) => new Sandbox(dir).providerArgs('c1', s).filter((a) => a.startsWith('--log-level='));

  it('runs the providers at debug unless the sandbox was started at another level', () => {
    expect(level(state())).to.deep.equal(['--log-level=debug']);
    expect(level(state({ providerLogLevel: 'info' }))).to.deep.equal(['--log-level=info']);
  });
});
