// Copies the front-end libraries the chat page uses from node_modules (installed by `npm ci`
// from package-lock.json) into web/vendor/, which CMake compiles into smol-server. Run it
// (`npm run vendor`) after changing their versions in package.json; the browser test checks
// that the committed copies match what npm installed.
import { copyFileSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

// [file in node_modules, file in web/vendor]. Each is a browser build that needs no bundler.
// Since v16 marked ships its minified browser build as lib/marked.umd.js (it defines the
// global `marked`); @highlightjs/cdn-assets is highlight.js's prebuilt bundle of its common
// languages (the global `hljs`) with its themes.
export const vendored = [
  ['marked/lib/marked.umd.js', 'marked.min.js'],
  ['dompurify/dist/purify.min.js', 'purify.min.js'],
  ['@highlightjs/cdn-assets/highlight.min.js', 'highlight.min.js'],
  ['@highlightjs/cdn-assets/styles/github.min.css', 'highlight-github.min.css'],
  ['@highlightjs/cdn-assets/styles/github-dark.min.css', 'highlight-github-dark.min.css'],
];

const here = dirname(fileURLToPath(import.meta.url));
if (process.argv[1] === fileURLToPath(import.meta.url)) {
  mkdirSync(join(here, 'web', 'vendor'), { recursive: true });
  for (const [from, to] of vendored) {
    copyFileSync(join(here, 'node_modules', from), join(here, 'web', 'vendor', to));
    console.log(`web/vendor/${to} <- node_modules/${from}`);
  }
}
