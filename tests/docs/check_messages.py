#!/usr/bin/env python3
"""check_messages.py: fails when README.md's troubleshooting table goes stale.

    tests/docs/check_messages.py [--list] [README.md]

The sources are those of the repository holding this script; the README is
README.md of the current directory unless named.

Every message a user can meet is written in the code as a printf format:
DDP_ERR(...) and fprintf(stderr, "...error: ..." or "...warning: ...") in runtime/, diag_at/
diag_file and the "ddpc: error:" lines in compiler/ and grammar/, and the
launchers' failures composed into *_failure buffers (printed as errors). For each,
the longest literal run between % conversions, if it is at least MIN_LEN
characters long (the part a reader would search for), must appear in the
README. Skipped, as the README describes them by class: internal errors,
out-of-memory failures, and formats with no literal run that long.

The other way round, each message in the README's troubleshooting tables
(the first `code span` of a row) must fit the format of a message (with
<placeholders> where it has conversions) or contain some text of a string
literal of the sources (ROW_LEN characters or more between conversions), so
a row for a message whose words are all gone fails too.

--list prints what is checked, one per line, and exits 0.
"""
import os
import re
import sys

MIN_LEN = 15  # the shortest literal run checked in the README
ROW_LEN = 10  # the shortest source text a README row must contain

# The calls whose first string-literal argument is a message a user sees.
CALLS = re.compile(r'\b(DDP_ERR|diag_at|diag_file|usage_error|fprintf|fputs)\s*\(')
# A launcher's failure, composed into a *_failure buffer that it then prints
# as "PROG: error: <it>" and uses as a restart's cause.
FAILURE_BUFFER = re.compile(r'\bsnprintf\s*\(\s*\w*_failure\s*,')
# printf conversions (%% is a literal percent sign).
CONVERSION = re.compile(r'%[-+ #0]*(\*|\d+)?(\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcspa]')
ESCAPES = {'n': '\n', 't': '\t', '"': '"', "'": "'", '\\': '\\', 'r': '\r', '0': '\0'}


def strip_comments(text):
    """C text with comments blanked (strings kept), so a commented-out call is not a message."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(text[i:j + 1])
            i = j + 1
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r'[^\n]', ' ', text[i:j]))  # keep line numbers
            i = j
        elif text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            out.append(' ' * (j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def first_literal(text, start):
    """The first string literal (adjacent ones joined) in the call whose '(' ends at START, or None."""
    depth, i, n = 1, start, len(text)
    while i < n and depth > 0:
        c = text[i]
        if c == '"':
            parts = []
            while i < n and text[i] == '"':
                j, buf = i + 1, []
                while j < n and text[j] != '"':
                    if text[j] == '\\':
                        buf.append(ESCAPES.get(text[j + 1], text[j + 1]))
                        j += 2
                    else:
                        buf.append(text[j])
                        j += 1
                parts.append(''.join(buf))
                i = j + 1
                while i < n and text[i] in ' \t\r\n':
                    i += 1
            return ''.join(parts)
        if c == "'":
            i = text.find("'", i + 2) + 1
            continue
        depth += c == '('
        depth -= c == ')'
        i += 1
    return None


def key_of(fmt):
    """The longest literal run of FMT (the text between % conversions), stripped,
    if it is at least MIN_LEN long; else None."""
    runs = [m.replace('%%', '%').strip() for m in CONVERSION.sub('\0', fmt).split('\0')]
    best = max(runs, key=len)
    return best if len(best) >= MIN_LEN else None


LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def messages(root, literals):
    """(file:line, format) of every user-facing message in the sources; every
    string literal's text between conversions goes into LITERALS."""
    found = []
    for d in ('runtime', 'compiler', 'grammar'):
        for name in sorted(os.listdir(os.path.join(root, d))):
            if not name.endswith(('.c', '.h', '.cu', '.y', '.l')):
                continue
            path = os.path.join(d, name)
            with open(os.path.join(root, path), encoding='utf-8') as f:
                text = strip_comments(f.read())
            for lit in LITERAL.finditer(text):
                text_of = re.split('(?:error|warning): ', lit.group(1).replace('\\n', ''))[-1]
                literals.update(r.strip() for r in CONVERSION.sub('\0', text_of).split('\0'))
            for m in FAILURE_BUFFER.finditer(text):
                fmt = first_literal(text, m.end())
                if fmt is not None:
                    found.append(('%s:%d' % (path, text.count('\n', 0, m.start()) + 1), fmt))
            for m in CALLS.finditer(text):
                fmt = first_literal(text, m.end())
                if fmt is None:
                    continue
                if m.group(1) in ('fprintf', 'fputs'):
                    # only error and warning lines: "%s: error: ...", "ddpc: warning: ..."
                    tag = next((t for t in ('error: ', 'warning: ') if t in fmt), None)
                    if tag is None or 'internal error: ' in fmt:  # README covers those by class
                        continue
                    fmt = fmt.split(tag, 1)[1]
                line = text.count('\n', 0, m.start()) + 1
                found.append(('%s:%d' % (path, line), fmt))
    return found


def readme_messages(readme):
    """The first code span of each table row under '## Troubleshooting'."""
    section = readme.split('\n## Troubleshooting', 1)
    if len(section) < 2:
        return []
    body = section[1].split('\n## ', 1)[0]
    rows = []
    for line in body.splitlines():
        if not line.startswith('|') or set(line) <= set('|-: '):
            continue
        m = re.search(r'`([^`]+)`', line.split('|')[1])
        if m:
            rows.append(m.group(1))
    return rows


def main(argv):
    listing = '--list' in argv
    args = [a for a in argv if a != '--list']
    readme_path = args[0] if args else 'README.md'
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    with open(readme_path, encoding='utf-8') as f:
        readme = f.read()
    # The README shows messages in code spans; undo markdown's one escape there.
    shown = readme.replace('\\|', '|')

    failures, checked = [], 0
    literals, patterns = set(), []
    for where, fmt in messages(root, literals):
        runs = CONVERSION.sub('\0', fmt.strip()).split('\0')
        if sum(len(r) for r in runs) >= ROW_LEN + 2:
            patterns.append(re.compile('.+'.join(re.escape(r) for r in runs), re.S))
        if 'internal error' in fmt or 'out of memory' in fmt:
            continue
        key = key_of(fmt)
        if key is None:
            continue
        checked += 1
        if listing:
            print('%-28s %s' % (where, key))
        if key not in shown:
            failures.append('%s: "%s" is not in %s' % (where, key, readme_path))

    # README rows whose message no longer exists in the code: a row must fit
    # a message's format (its <placeholders> where the conversions are), or
    # hold some literal text of the sources ROW_LEN characters or more long.
    pieces = [p for p in literals if len(p) >= ROW_LEN]
    rows = readme_messages(readme)
    for row in rows:
        row = row.replace('\\|', '|')
        if not any(p.fullmatch(row) for p in patterns) and not any(p in row for p in pieces):
            failures.append('%s: the troubleshooting row `%s` matches no message in the sources' % (readme_path, row))

    if listing:
        return 0
    for f in failures:
        print('check_messages: ' + f)
    print('check_messages: %d messages checked against %s, %d table rows checked against the sources: %s'
          % (checked, readme_path, len(rows), 'FAILED' if failures else 'OK'))
    return 1 if failures or not rows else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
