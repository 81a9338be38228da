import { table } from './report.js';

/**
 * Prints the reliability table once every scenario has run (the e2e hooks run the sandbox).
 * Required before them, so that it prints even when their RBAC audit fails the run.
 */
export const mochaHooks = {
  afterAll() {
    console.log(`\nreliability:\n${table()}\n`);
  },
};
