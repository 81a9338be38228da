// ESLint's flat config. Type-aware rules from typescript-eslint catch the bugs a Node server
// cannot afford: a promise nobody awaits or catches (no-floating-promises), an async callback
// where the caller ignores what it returns (no-misused-promises: express, EventEmitter,
// setTimeout), an await of a non-promise (await-thenable). A full lint of the repository takes
// about a minute on 2 cores.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/** Folders of the running server, where a function longer than 80 lines must say why it is one. */
const SERVER_CODE = ['provider/**/*.ts', 'scheduler/**/*.ts', 'webhook/**/*.ts', 'certs/**/*.ts'];

export default tseslint.config(
  {
    ignores: ['dist/', 'node_modules/', '.sandbox/', '.tmp/', '.bench/', 'charts/', 'manifests/', 'test/sandbox/go/'],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: true,
        tsconfigRootDir: import.meta.dirname,
      },
    },
    linterOptions: {
      reportUnusedDisableDirectives: 'error',
    },
    rules: {
      // `any` is used on purpose at the JSON boundaries: bodies from parseUntrustedJson that the
      // next lines check field by field, kubectl's -o json, node-forge's untyped fields. tsc's
      // strict mode already refuses an implicit any; these rules would ask for a cast on every
      // line of those checks without catching a bug.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // An `async` function that does not await still answers a promise, and a throw in it
      // becomes a rejection: the style here for functions an interface wants async.
      '@typescript-eslint/require-await': 'off',
      // Functions are passed by reference on purpose: static key functions (`.map(X.keyOf)`),
      // closures held in interface-typed objects, and sinon stubs in assertions. The rule cannot
      // tell these from a method that reads `this`.
      '@typescript-eslint/unbound-method': 'off',
      // Its fixes broke the typecheck here (a cast that narrows a union, a `!` after a check that
      // tsc does not carry into a closure), and a cast it calls needless costs nothing at run time.
      '@typescript-eslint/no-unnecessary-type-assertion': 'off',
      // Rejecting with what was caught passes the original error on, whatever its type.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingAny: true, allowThrowingUnknown: true }],
      // `_name` marks a binding kept on purpose: a rest sibling that drops a field, an ignored argument.
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrorsIgnorePattern: '^_', destructuredArrayIgnorePattern: '^_', ignoreRestSiblings: true },
      ],
      // A `let` declared first and assigned later, read by closures made in between, cannot be a const.
      // A destructuring whose other names are reassigned stays a `let` as a whole.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true, destructuring: 'all' }],
    },
  },
  {
    files: ['test/**/*.ts'],
    rules: {
      // chai's property assertions (`expect(x).to.be.true`) are expressions on purpose.
      '@typescript-eslint/no-unused-expressions': 'off',
      // Test messages and collected output stringify buffers, arrays and numbers on purpose.
      '@typescript-eslint/restrict-template-expressions': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      // Tests assert that control characters are gone, with a regex that names them.
      'no-control-regex': 'off',
    },
  },
  {
    files: SERVER_CODE,
    rules: {
      'max-lines-per-function': ['error', { max: 80, skipBlankLines: true, skipComments: true }],
    },
  },
  {
    // Plain JavaScript (bin/, this file): no tsconfig covers it, so no type-aware rules.
    files: ['**/*.js'],
    ...tseslint.configs.disableTypeChecked,
    languageOptions: {
      ...tseslint.configs.disableTypeChecked.languageOptions,
      globals: { process: 'readonly', URL: 'readonly' },
    },
  },
);
