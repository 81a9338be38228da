import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SHIPPED_NODE_OPTIONS } from '../../../provider/core/heap-growth.js';
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

  it("starts every provider replica with the image's NODE_OPTIONS, then the caller's, which win", () => {
    const saved = process.env.NODE_OPTIONS;
    try {
      delete process.env.NODE_OPTIONS;
      const specs = new Sandbox(dir).specs('c1', 'provider', state({ providerReplicas: 2 }));
      expect(specs.map((s) => s.env?.NODE_OPTIONS)).to.deep.equal([SHIPPED_NODE_OPTIONS, SHIPPED_NODE_OPTIONS]);
      process.env.NODE_OPTIONS = '--max-semi-space-size=16';
      expect(new Sandbox(dir).specs('c1', 'provider', state())[0]!.env?.NODE_OPTIONS).to.equal(`${SHIPPED_NODE_OPTIONS} --max-semi-space-size=16`);
    } finally {
      if (saved === undefined) delete process.env.NODE_OPTIONS;
      else process.env.NODE_OPTIONS = saved;
    }
  });
});
