// The task definitions of a project: inline `exec.tasks` plus every `*.json` file in
// `exec.taskDirs` (one task or an array each), validated together (SPEC §2, §5).

import { join, relative, resolve } from 'node:path';
import { configTextOf, readConfigBytes } from '../config/find.js';
import { displayPath, parseJsonFile, workingFolderProblem, type Project } from '../config/load.js';
import type { TaskDef } from '../config/types.js';
import { formatPath, validateTaskFile, validateTaskSet, type LocatedTask } from '../config/validate.js';
import { checkTaskFile, checkTaskFolder, UntrustedPathError } from '../config/trust.js';
import { ConfigError, errnoCode, errnoWords, UnsafePathError, type ConfigIssue } from '../errors.js';
import { namesIn } from '../fs/files.js';
import { statOrWhy } from '../fs/look.js';

export interface SourcedTask {
  task: TaskDef;
  /** Where it was defined, as shown to people: `routinely.json` or `tasks/build.json`. */
  source: string;
}

export function loadTaskDefinitions(project: Project): SourcedTask[] {
  const configShown = displayPath(project.configPath);
  const located: LocatedTask[] = project.config.exec.tasks.map((task, i) => ({ task, path: ['exec', 'tasks', i] }));
  const issues: ConfigIssue[] = [];
  const read = new Set<string>();
  for (const dir of project.config.exec.taskDirs) {
    const abs = resolve(project.root, dir);
    // one folder named twice (`tasks`, `./tasks/`) is read once: its tasks are no duplicates of
    // themselves
    if (read.has(abs)) continue;
    read.add(abs);
    let names: string[];
    try {
      // a task folder, and a task file that is a link, are trusted as the project folder is
      // (SPEC §12): another user who may write them could choose what runs as you
      checkTaskFolder(abs);
      // a task folder that is missing is said as anything else that is no folder: read as "no
      // tasks", a typo or a volume not mounted would retire every task it holds (register)
      const st = statOrWhy(abs);
      if ('code' in st && st.code === 'ENOENT') {
        issues.push({
          path: 'exec.taskDirs',
          message: `${dir} does not exist: create it, or take it out of exec.taskDirs (a missing folder is never read as "no tasks": register would retire every task it held)`,
        });
        continue;
      }
      if ('code' in st) throw Object.assign(new Error(st.code), { code: st.code });
      if (!st.isDirectory()) throw Object.assign(new Error('not a folder'), { code: 'ENOTDIR' });
      // inside the project, as "../x" must be, even through a link (as a task's cwd)
      const escapes = workingFolderProblem(project.root, dir);
      if (escapes) {
        issues.push({ path: 'exec.taskDirs', message: `${dir} ${escapes}` });
        continue;
      }
      // `*.json` as a shell reads it: not a hidden name (an editor's lock link `.#a.json`, macOS's
      // `._a.json` beside each file on some volumes), which is no task and may not be readable
      names = namesIn(abs)
        .filter((n) => n.endsWith('.json') && !n.startsWith('.'))
        .sort();
    } catch (err) {
      if (err instanceof UntrustedPathError) throw new UnsafePathError(err.message);
      issues.push({
        path: 'exec.taskDirs',
        message: `cannot read ${dir}: ${errnoCode(err) ? errnoWords(errnoCode(err)!) : String(err)}`,
      });
      continue;
    }
    for (const name of names) {
      const file = join(abs, name);
      const shown = relative(project.root, file);
      let text: string;
      try {
        checkTaskFile(file);
        text = configTextOf(readConfigBytes(file));
      } catch (err) {
        if (err instanceof UntrustedPathError) throw new UnsafePathError(err.message);
        issues.push({
          file: shown,
          path: '',
          message: errnoCode(err) ? `cannot read the file: ${errnoWords(errnoCode(err)!)}` : (err as Error).message,
        });
        continue;
      }
      let json: unknown;
      try {
        json = parseJsonFile(text, shown);
      } catch (err) {
        if (err instanceof ConfigError) issues.push(...err.issues.map((i) => ({ ...i, file: shown })));
        continue;
      }
      const r = validateTaskFile(json, shown);
      if (r.ok) located.push(...r.value);
      else issues.push(...r.issues);
    }
  }
  if (issues.length === 0) issues.push(...validateTaskSet(located, project.config.exec.providers));
  // a task file's `cwd` that is a file, or leaves the project through a link, as for inline
  // tasks (config/load.ts): refused when the tasks are read, not at the task's turn to run
  for (const l of issues.length === 0 ? located : []) {
    const problem = l.file && l.task.cwd !== undefined ? workingFolderProblem(project.root, l.task.cwd) : null;
    if (problem)
      issues.push({
        file: l.file,
        path: formatPath([...l.path, 'cwd']),
        message: `${JSON.stringify(l.task.cwd)} ${problem}`,
      });
  }
  if (issues.length > 0) throw new ConfigError(configShown, issues);
  return located.map((l) => ({ task: l.task, source: l.file ?? configShown }));
}
