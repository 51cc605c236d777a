// The `$schema` that `routinely init` writes: one that resolves where the file is edited.
//
// Editors read `$schema` as a URI: VS Code resolves a value starting with "." against the file
// itself, and loads absolute `file://` and `https://` URIs; JetBrains IDEs do the same. A bare
// absolute path is not a URI, and "node_modules/…" without "./" is not resolved against the file.
// So, in order:
// 1. routinely installed for the project (node_modules in the project folder or a parent, where
//    Node finds it too): a relative "./…" or "../…" path. It works for everyone who clones the
//    project and runs `npm install`, and follows upgrades.
// 2. otherwise (a global install, the npx cache, a checkout): the schema of the routinely that
//    is running `init`, as a file:// URI. It works on this machine only, which the starter's
//    comment says, with the relative path to use once routinely is a dev dependency. (No
//    published https:// URL is used: the schema must match the version that validates the file,
//    and editors must not need the network.)

import { readPackageFile } from '../fs/ops.js';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { isFile } from '../config/load.js';

const SCHEMA = join('config', 'routinely.schema.json');
export const INSTALLED_SCHEMA = './node_modules/routinely/config/routinely.schema.json';

export interface SchemaRef {
  ref: string;
  /** Comment lines for the starter, above `$schema`. */
  comment: string[];
}

export function schemaRefFor(projectDir: string, running = runningSchema()): SchemaRef {
  for (let d = projectDir; ; d = dirname(d)) {
    const installed = join(d, 'node_modules', 'routinely', SCHEMA);
    if (isFile(installed)) {
      const rel = relative(projectDir, installed);
      return {
        ref: rel.startsWith('..') ? rel : `./${rel}`,
        comment: ['Editor completion and checks, from the routinely installed in node_modules.'],
      };
    }
    if (dirname(d) === d) break;
  }
  if (running) {
    return {
      ref: pathToFileURL(running).href,
      comment: [
        'Editor completion and checks, from the routinely that wrote this file (this machine only).',
        `Once routinely is a dev dependency (npm install -D routinely), use "${INSTALLED_SCHEMA}".`,
      ],
    };
  }
  return { ref: INSTALLED_SCHEMA, comment: ['Editor completion and checks (after npm install -D routinely).'] };
}

/** The schema file of this routinely: beside the package.json of the package this code is in. */
function runningSchema(): string | null {
  for (let d = dirname(fileURLToPath(import.meta.url)); ; d = dirname(d)) {
    const pkg = join(d, 'package.json');
    if (isFile(pkg) && isFile(join(d, SCHEMA))) {
      try {
        if ((JSON.parse(readPackageFile(pkg)) as { name?: unknown }).name === 'routinely') return join(d, SCHEMA);
      } catch {
        // not our package.json: keep looking
      }
    }
    if (dirname(d) === d) return null;
  }
}
