import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The folder holding our package.json, found by walking up from `from` (a file URL or path).
 * The same code runs from the sources (`provider/tools/`, through tsx in tests) and compiled
 * (`dist/provider/tools/`), at different depths, so no fixed number of `..` fits both.
 * Throws if no package.json is found up to the filesystem root.
 */
export function packageRoot(from: string | URL = import.meta.url): string {
  let dir = dirname(typeof from === 'string' && !from.startsWith('file:') ? from : fileURLToPath(from));
  for (;;) {
    if (existsSync(join(dir, 'package.json'))) return dir;
    const parent = dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${String(from)}`);
    dir = parent;
  }
}

/** The `version` field of our package.json. */
export function packageVersion(root = packageRoot()): string {
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { version?: unknown };
  return typeof pkg.version === 'string' ? pkg.version : 'unknown';
}

/**
 * Whether `root` is a clone of the repository rather than the published package: the sandbox
 * (and so the demo) and the benchmarks need files that are not published (the Go modules that
 * build the control plane, the benchmark sources).
 */
export function isClone(root = packageRoot()): boolean {
  return existsSync(join(root, 'test', 'sandbox', 'build.sh'));
}

/** The message for a command that needs a clone, naming the command. */
export function needsCloneMessage(command: string): string {
  return `admiralty ${command}: this command needs a clone of the repository (it builds its own Kubernetes control plane from the Go modules under test/sandbox/go, which the npm package does not ship): git clone the repository, then npm ci && npm run build && npx admiralty ${command}`;
}
