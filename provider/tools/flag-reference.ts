import { FLAGS } from '../core/config.js';

/**
 * docs/flags.md, rendered from the provider's flag table (`FLAGS` in provider/core/config.ts):
 * the page is generated, so it cannot drift from the code. `npm run docs:flags` writes it; a
 * unit test fails while the page and the table disagree.
 */
export function renderFlagReference(): string {
  const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
  const rows = Object.values(FLAGS).map((f) => {
    const values = f.values ? ` One of: ${f.values.join(', ')}.` : '';
    return `| \`--${f.flag}\` | ${f.env ? `\`${f.env}\`` : ''} | ${f.default !== undefined && f.default !== '' ? `\`${f.default}\`` : ''} | ${f.kind} | ${cell(f.help)}.${cell(values)} |`;
  });
  return [
    "# The provider's flags",
    '',
    '<!-- Generated from provider/core/config.ts by `npm run docs:flags`; do not edit by hand. -->',
    '',
    '`admiralty provider [flags]` takes `--name=value` or `--name value`; a flag wins over its',
    'environment variable. Durations are Go durations (`90s`, `2m`) or whole seconds. Every problem',
    'in the flags is reported at once, with the usage, and the provider exits 2.',
    '',
    '| flag | environment | default | kind | what it does |',
    '|---|---|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}
