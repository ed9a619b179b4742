/**
 * The import rules of src/ and bench/, checked by test/dependencies.test.ts
 * (npm test) and by hand with `npx depcruise src bench`. docs/architecture.md
 * draws the layers.
 *
 * Layers, each importing only those after it:
 *   top         relay.ts, cli.ts, config.ts, validate.ts, status.ts, examples.ts, tools/,
 *               fleet/ (a relay's membership in the fleet and fleet-wide CSDS: wiring
 *               between the client streams' status and the shared tier)
 *   downstream  client streams, responses, per-client state, status views
 *   engine      the engine: one subscription per canonical key, routing, fan-out
 *   upstream, cache   side by side; neither imports the other
 *   proto, xdstp, typed-json   wire codecs, resource names, proto3 JSON of Envoy's types
 *   base        address.ts, upstream-uri.ts, log.ts, log-limit.ts, version.ts
 *
 * admin/, metrics.ts (with process-metrics.ts) and security/ are leaves: the top builds them and hands
 * them in. Layers may import a leaf (to count, to check a limit), a leaf
 * imports only other leaves, proto, xdstp and base; nothing but the top imports
 * admin/.
 *
 * Type-only imports count: `tsPreCompilationDeps` is on, so an `import type`
 * that runs back up or closes a cycle is reported like any other. A type
 * import still ties one module's shape to another's, which is what the layers
 * are about.
 */

/** Paths under src/, as regular expressions. */
const TOP = '^src/(relay|cli|config|validate|status|examples)[.]ts$|^src/(tools|fleet)/';
const DOWNSTREAM = '^src/downstream/';
const ENGINE = '^src/engine/';
const FLOW = '^src/(downstream|engine|upstream|cache)/';
const LEAF = '^src/(admin/|security/|(process-)?metrics[.]ts$)';
const ADMIN = '^src/admin/';
const CODECS = '^src/(proto|xdstp|typed-json)/';
const BASE = '^src/(address|upstream-uri|log|log-limit|version)[.]ts$';

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle: the modules in it cannot be read, tested or moved apart.',
      from: { path: '^(src|bench)/' },
      to: { circular: true },
    },
    {
      name: 'src-stays-in-src',
      severity: 'error',
      comment: 'The relay does not import tests or benchmarks.',
      from: { path: '^src/' },
      to: { path: '^(test|bench)/' },
    },
    {
      name: 'nothing-imports-the-top',
      severity: 'error',
      comment: 'Only the top imports the top (relay, CLI, configuration).',
      from: { path: '^src/', pathNot: TOP },
      to: { path: TOP },
    },
    {
      name: 'downstream-is-the-top-flow-layer',
      severity: 'error',
      comment: 'Only the top imports downstream/.',
      from: { path: '^src/', pathNot: [TOP, DOWNSTREAM] },
      to: { path: DOWNSTREAM },
    },
    {
      name: 'engine-does-not-import-downstream',
      severity: 'error',
      comment: 'The engine knows watchers only through the port in engine/.',
      from: { path: ENGINE },
      to: { path: DOWNSTREAM },
    },
    {
      name: 'upstream-and-cache-are-below-the-engine',
      severity: 'error',
      comment: 'upstream/ and cache/ import neither engine/ nor downstream/ nor each other.',
      from: { path: '^src/(upstream|cache)/' },
      to: { path: '^src/(engine|downstream)/' },
    },
    {
      name: 'upstream-and-cache-are-siblings',
      severity: 'error',
      from: { path: '^src/(upstream|cache)/' },
      to: { path: '^src/(upstream|cache)/', pathNot: '^src/$1/' },
    },
    {
      name: 'codecs-and-names-are-below-the-flow',
      severity: 'error',
      comment: 'Codecs and names import only each other and base.',
      from: { path: CODECS },
      to: { path: '^src/', pathNot: [CODECS, BASE] },
    },
    {
      name: 'base-imports-only-base',
      severity: 'error',
      from: { path: BASE },
      to: { path: '^src/', pathNot: BASE },
    },
    {
      name: 'leaves-do-not-read-the-flow',
      severity: 'error',
      comment: 'admin/, metrics.ts and security/ are handed what they need by the top.',
      from: { path: LEAF },
      to: { path: FLOW },
    },
    {
      name: 'only-the-top-imports-admin',
      severity: 'error',
      from: { path: '^src/', pathNot: [TOP, ADMIN] },
      to: { path: ADMIN },
    },
    {
      name: 'bench-lib-is-the-bottom',
      severity: 'error',
      comment: 'bench/lib/ is shared by the coordinator, the scenarios and the load generator; it imports none of them.',
      from: { path: '^bench/lib/' },
      to: { path: '^bench/', pathNot: '^bench/lib/' },
    },
    {
      name: 'bench-loadgen-imports-only-lib',
      severity: 'error',
      from: { path: '^bench/loadgen/' },
      to: { path: '^bench/', pathNot: '^bench/(lib|loadgen)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '^(dist|node_modules)/' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { extensions: ['.ts', '.js'] },
  },
};
