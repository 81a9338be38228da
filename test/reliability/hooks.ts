import { table } from './report.js';

/** Prints the reliability table once every scenario has run (the e2e hooks run the sandbox). */
export const mochaHooks = {
  afterAll() {
    console.log(`\nreliability:\n${table()}\n`);
  },
};
