#!/usr/bin/env node
// Bundles viewer_page.jsx (the SDK and the React DesktopViewer, unmodified) into OUTDIR with an
// index.html, for tests/clients/reference_sdk/test_sdk_viewer.py:   node build_viewer.mjs OUTDIR
// Prints one JSON line: {"outdir", "bytes", "ms"}.

import { writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const outdir = process.argv[2];
if (!outdir) {
  process.stderr.write("usage: node build_viewer.mjs OUTDIR\n");
  process.exit(2);
}

const started = performance.now();
const result = await esbuild.build({
  entryPoints: [join(here, "viewer_page.jsx")],
  outfile: join(outdir, "viewer.js"),
  bundle: true,
  format: "esm",
  platform: "browser",
  target: "chrome120",
  jsx: "automatic",
  define: { "process.env.NODE_ENV": '"production"' },
  minify: false,
  sourcemap: false,
  logLevel: "error",
  metafile: true,
});
await writeFile(join(outdir, "index.html"), `<!doctype html>
<html><head><meta charset="utf-8"><title>DesktopViewer (sandbox-agent 0.4.2)</title>
<style>body { margin: 0; font-family: sans-serif; } #root { width: 1040px; padding: 8px; }</style></head>
<body><div id="root"></div><script type="module" src="viewer.js"></script></body></html>
`);
const bytes = Object.values(result.metafile.outputs).reduce((sum, o) => sum + o.bytes, 0);
process.stdout.write(JSON.stringify({ outdir, bytes, ms: Math.round(performance.now() - started) }) + "\n");
