import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ensurePki } from '../../sandbox/pki.js';
import type { SandboxState } from '../../sandbox/sandbox.js';

/**
 * A sandbox folder that runs nothing, for tests of the command lines the sandbox builds: made in
 * the temporary folder, removed after the suite. With `pki`, its certificates are made first
 * (openssl: seconds on a busy machine, so in a hook rather than in the first test), since a
 * component's arguments name them. `state` is a two-cluster sandbox's, with `extra` over it.
 */
export function offlineSandbox(prefix: string, opts: { pki?: boolean } = {}): { dir: string; state: (extra?: Partial<SandboxState>) => SandboxState } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  if (opts.pki) {
    before(function () {
      this.timeout(60_000);
      ensurePki(join(dir, 'pki'));
    });
  }
  after(() => rmSync(dir, { recursive: true, force: true }));
  return { dir, state: (extra = {}) => ({ basePort: 30000, clusters: ['c1', 'c2'], binDir: dir, kwokModuleDir: dir, provider: true, ...extra }) };
}
