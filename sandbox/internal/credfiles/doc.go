// Package credfiles makes the copies of tools' credential files that a
// confined command reads in their place: ~/.npmrc, ~/.pypirc, pip.conf,
// ~/.docker/config.json and cargo's credentials keep their settings (a
// registry, a mirror, a credential helper's name) and lose their secrets
// (tokens, passwords, _auth, the user information of an index URL).
//
// It runs in the supervisor, before the command starts, on the caller's
// files: it reads them through a descriptor opened without following a
// symbolic link (a regular file, of bounded size), never by a path twice.
// What it cannot parse it refuses, and the caller hides the file whole. It
// must never write next to the original, nor return a copy that still holds
// a secret it recognises.
package credfiles
