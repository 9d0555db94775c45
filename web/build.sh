#!/usr/bin/env bash
# Rebuilds the dashboard page's third-party assets in tiltframe/http/static/vendor/
# from the pinned lockfile web/package-lock.json:
#   npm ci --ignore-scripts, then copies uPlot's browser build, its CSS and its LICENSE,
#   and writes vendor/MANIFEST.json (package, version, lockfile integrity, sha256 of each file).
# The output is committed; running this again on any machine reproduces it byte for byte.
# Needs node and npm; nothing else. Usage: web/build.sh
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
vendor="$here/../tiltframe/http/static/vendor"

cd "$here"
npm ci --ignore-scripts --no-audit --no-fund

pkg="$here/node_modules/uplot"
mkdir -p "$vendor"
rm -f "$vendor"/uPlot.* "$vendor"/MANIFEST.json
cp "$pkg/dist/uPlot.iife.min.js" "$vendor/uPlot.iife.min.js"
cp "$pkg/dist/uPlot.min.css" "$vendor/uPlot.min.css"
cp "$pkg/LICENSE" "$vendor/uPlot.LICENSE"

node - "$here/package-lock.json" "$vendor" <<'JS'
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const [lockPath, vendor] = process.argv.slice(2);
const entry = JSON.parse(fs.readFileSync(lockPath, "utf8")).packages["node_modules/uplot"];
const installed = JSON.parse(fs.readFileSync(path.join(path.dirname(lockPath), "node_modules/uplot/package.json"), "utf8"));
if (installed.version !== entry.version) {
  throw new Error(`installed uplot ${installed.version} != lockfile ${entry.version}`);
}
const files = {};
for (const name of ["uPlot.LICENSE", "uPlot.iife.min.js", "uPlot.min.css"]) {
  files[name] = crypto.createHash("sha256").update(fs.readFileSync(path.join(vendor, name))).digest("hex");
}
const manifest = {
  package: "uplot",
  version: entry.version,
  integrity: entry.integrity,
  license: entry.license,
  files,
};
fs.writeFileSync(path.join(vendor, "MANIFEST.json"), JSON.stringify(manifest, null, 2) + "\n");
JS

echo "vendor assets written to tiltframe/http/static/vendor/ (uplot $(node -p 'require("./node_modules/uplot/package.json").version'))"
