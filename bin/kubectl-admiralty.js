#!/usr/bin/env node
// The kubectl plugin: kubectl runs `kubectl-admiralty` from the PATH for `kubectl admiralty
// <verb>` (kubectl's plugin convention), with the arguments after `admiralty`. The same bundle as
// bin/admiralty.js; only the name in usage texts differs. Not compiled: plain JavaScript.
import { existsSync } from 'node:fs';

const cli = new URL('../dist/bundle/cli.js', import.meta.url);

if (!existsSync(cli)) {
  process.stderr.write('kubectl-admiralty: dist/ is missing: run `npm run build` first (from a clone of the repository)\n');
  process.exit(1);
}

const { runAndExit } = await import(cli.href);
await runAndExit(process.argv.slice(2), 'kubectl admiralty');
