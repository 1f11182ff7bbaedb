package zone

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// Redacted stands for a secret in everything pgdns prints.
const Redacted = "REDACTED"

// Redact is v as text to print (in a config error, a log line, a probe
// error), with every secret in it hidden. It is the one rule of redaction,
// used wherever a configured value or a DSN is quoted:
//
//   - by name: the whole value of a key whose last part names a secret
//     (password, passwd, secret, token) is hidden, and so is each such entry
//     of a map, at any depth (probe: {dsn: {password: x}});
//   - by structure: a string is read as a DSN and printed again, the URL
//     form's userinfo password and password or sslpassword query values
//     hidden, the keyword/value form's password and sslpassword values
//     hidden whatever they hold (quotes, backslashes, spaces when quoted);
//   - text that is neither, or a DSN too broken to read, is cut at the
//     first "password" (or a URL's userinfo is hidden whole), since where
//     its value ends cannot be known.
//
// name is the configuration key v belongs to, or "" when there is none.
func Redact(name string, v any) string {
	if secretName(name) && v != nil {
		return Redacted
	}
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return redactText(v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		b.WriteString("map[")
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(k + ":" + Redact(k, v[k]))
		}
		return b.String() + "]"
	case []any:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = Redact("", e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case []string:
		parts := make([]string, len(v))
		for i, e := range v {
			parts[i] = redactText(e)
		}
		return "[" + strings.Join(parts, " ") + "]"
	case error:
		return redactText(v.Error())
	}
	return redactText(fmt.Sprint(v))
}

// secretName reports whether a key (its last dot-separated part) names a
// secret.
func secretName(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.ToLower(name)
	for _, s := range []string{"password", "passwd", "secret", "token"} {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}

func redactText(s string) string {
	if strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://") {
		if out, ok := redactURL(s); ok {
			return out
		}
		return brokenURL(s)
	}
	if out, ok := redactKeywordValue(s); ok {
		return out
	}
	return cutSecrets(s)
}

// redactURL prints a DSN in URL form again without its passwords; !ok
// when it does not parse as a URL.
func redactURL(s string) (string, bool) {
	if strings.ContainsAny(s, " \t\n\r\v\f") {
		return "", false // not one URL: text follows it
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", false
	}
	if secretKeyword(u.Host + u.Path + u.User.Username()) {
		return "", false // "password" where none belongs: not a DSN a person meant
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), Redacted)
	}
	if u.RawQuery != "" {
		params := strings.Split(u.RawQuery, "&")
		for i, p := range params {
			k, _, _ := strings.Cut(p, "=")
			if key, err := url.QueryUnescape(k); err != nil || secretKeyword(key) || secretKeyword(p) {
				params[i] = k + "=" + Redacted
			}
		}
		u.RawQuery = strings.Join(params, "&")
	}
	if u.Fragment != "" || u.RawFragment != "" {
		u.Fragment, u.RawFragment = Redacted, "" // libpq has no fragments: a stray '#' split a password
	}
	return u.String(), true
}

// secretKeyword reports whether a libpq connection keyword carries a
// secret.
func secretKeyword(k string) bool {
	return indexASCIIFold(k, "password") >= 0
}

// redactKeywordValue reads s as libpq keyword/value pairs (key = value,
// the value bare with backslash escapes or in single quotes) and prints it
// again as written, the value of each password keyword replaced; !ok when
// s is not such pairs.
func redactKeywordValue(s string) (string, bool) {
	var b strings.Builder
	i, pairs := 0, 0
	for {
		for i < len(s) && isSpace(s[i]) {
			b.WriteByte(s[i])
			i++
		}
		if i == len(s) {
			return b.String(), pairs > 0
		}
		eq := strings.IndexByte(s[i:], '=')
		if eq < 0 {
			return "", false
		}
		key := s[i : i+eq]
		if k := strings.TrimRight(key, " \t\n\r\v\f"); k == "" || strings.ContainsAny(k, " \t\n\r\v\f'\\") {
			return "", false
		}
		b.WriteString(key + "=")
		i += eq + 1
		for i < len(s) && isSpace(s[i]) {
			b.WriteByte(s[i])
			i++
		}
		start := i
		if i < len(s) && s[i] == '\'' {
			i++
			for i < len(s) && s[i] != '\'' {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(s) {
				return "", false // unterminated: where the value ends is not known
			}
			i++
			if i < len(s) && !isSpace(s[i]) {
				return "", false // 'a'b: libpq reads b as the next keyword, a person meant one value
			}
		} else {
			for i < len(s) && !isSpace(s[i]) {
				if s[i] == '\\' {
					i++
				}
				i++
			}
			i = min(i, len(s))
		}
		if secretKeyword(key) || secretKeyword(s[start:i]) { // "x=password=..." is no DSN a person meant
			b.WriteString(Redacted)
		} else {
			b.WriteString(s[start:i])
		}
		pairs++
	}
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// brokenURL hides the authority of a DSN in URL form that does not parse
// (postgres://u:pa/ss@h, postgres://u:pw with no host): which part of it is
// the password is not known. The rest is cut as text.
func brokenURL(s string) string {
	scheme, rest, _ := strings.Cut(s, "://")
	word := rest
	if i := strings.IndexAny(word, " \t\n\r\v\f"); i >= 0 {
		word = word[:i]
	}
	end := strings.LastIndexByte(word, '@')
	if end < 0 {
		if end = strings.IndexAny(word, "/?"); end < 0 {
			end = len(word)
		}
	}
	return scheme + "://" + Redacted + cutSecrets(rest[end:])
}

// cutSecrets hides what may be a secret in text that cannot be read as a
// DSN: a URL's userinfo whole, and everything from the first "password"
// on, as where its value ends is not known.
func cutSecrets(s string) string {
	if i := indexASCIIFold(s, "password"); i >= 0 {
		s = s[:i] + "password=" + Redacted + " (the rest cannot be read as a DSN)"
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "://")
		if i < 0 {
			break
		}
		b.WriteString(s[:i+3])
		s = s[i+3:]
		end := strings.IndexAny(s, " \t\n\r\v\f")
		if end < 0 {
			end = len(s)
		}
		if at := strings.LastIndexByte(s[:end], '@'); at >= 0 {
			b.WriteString(Redacted)
			s = s[at:]
		}
	}
	return b.String() + s
}

// indexASCIIFold is strings.Index ignoring ASCII case, on bytes (so that
// the index is one of s, whatever s holds); word is lower case.
func indexASCIIFold(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		j := 0
		for j < len(word) && s[i+j]|0x20 == word[j] {
			j++
		}
		if j == len(word) {
			return i
		}
	}
	return -1
}
