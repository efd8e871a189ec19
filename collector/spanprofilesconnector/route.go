// Copyright The otel-thread-ctx Authors
// SPDX-License-Identifier: Apache-2.0

package spanprofilesconnector

import (
	"net/url"
	"strings"
	"unicode"

	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profiledict"
	"github.com/otel-thread-ctx/otel-thread-ctx/collector/spanprofilesconnector/internal/profilestore"
)

// Where a request's route comes from when its server span has no http.route (NestJS 12's
// server spans, for one, are named `GET` and carry none): the route its own samples carried
// (the record attribute http.route that a child span, such as Nest's handler span, set), else
// its method and a template of its path. Never its raw URL: ids and numbers would make every
// request a route of its own.
const (
	// Span attributes the connector writes on an entry span without http.route.
	AttrRoute       = "thread_ctx.route"
	AttrRouteSource = "thread_ctx.route.source"

	routeFromSamples = "samples"
	routeFromPath    = "path"
	routeFromGraphQL = "graphql"
)

// The GraphQL operation a span executed (@opentelemetry/instrumentation-graphql's execute span;
// semantic conventions): a gateway serves every operation as `POST /graphql`, so its operation
// is its route: "query ProductPage", "mutation (anonymous)".
const (
	attrGraphQLOperationType = "graphql.operation.type"
	attrGraphQLOperationName = "graphql.operation.name"
	graphqlAnonymous         = "(anonymous)"
)

// graphqlOperation is the route of the operation a span executed, "" when it executed none.
// Bounded: a type other than the three GraphQL has is "operation", the name is cut at
// profiledict.MaxLabelBytes.
func graphqlOperation(s ptrace.Span) string {
	attrs := s.Attributes()
	typ, hasType := attrs.Get(attrGraphQLOperationType)
	name := profilestore.StrAttr(attrs, attrGraphQLOperationName)
	if !hasType && name == "" {
		return ""
	}
	kind := "operation"
	switch t := typ.AsString(); t {
	case "query", "mutation", "subscription":
		kind = t
	}
	if name == "" {
		name = graphqlAnonymous
	}
	return profiledict.Truncate(kind + " " + name)
}

// Span attributes a route is made from (semantic conventions, current and older names).
var (
	methodAttrs = []string{"http.request.method", "http.method"}
	pathAttrs   = []string{"url.path", "http.target"}
	urlAttrs    = []string{"url.full", "http.url"}
)

// isEntry says whether a span is a request's entry: a server span, or a root.
func isEntry(s ptrace.Span) bool {
	return s.Kind() == ptrace.SpanKindServer || s.ParentSpanID().IsEmpty()
}

// ownRoute is the span's http.route, "" when it has none.
func ownRoute(s ptrace.Span) string {
	if r, ok := s.Attributes().Get(profilestore.AttrHTTPRoute); ok {
		return r.AsString()
	}
	return ""
}

// isMountRoute says whether a route is a middleware's mount path rather than a handler's:
// Express's instrumentation gives its middleware spans http.route `/`, so a request's samples
// in its body parser carry `/` whatever the request's route.
func isMountRoute(r string) bool {
	return r == "/" || r == "*" || r == "/*"
}

// bestRoute picks the handler's route that weighs most; "" when the samples carried none but
// mount paths.
func bestRoute(weights map[string]int64) string {
	best, bestW := "", int64(-1)
	for r, w := range weights {
		if r == "" || isMountRoute(r) {
			continue
		}
		if w > bestW || (w == bestW && r < best) {
			best, bestW = r, w
		}
	}
	return best
}

// pathRoute is the span's method and templated path ("GET /users/:id"), "" when it has no
// path.
func pathRoute(s ptrace.Span) string {
	attrs := s.Attributes()
	method := ""
	for _, k := range methodAttrs {
		if v := profilestore.StrAttr(attrs, k); v != "" {
			method = v
			break
		}
	}
	path := ""
	for _, k := range pathAttrs {
		if v := profilestore.StrAttr(attrs, k); v != "" {
			path = v
			break
		}
	}
	if path == "" {
		for _, k := range urlAttrs {
			if u, err := url.Parse(profilestore.StrAttr(attrs, k)); err == nil && u.Path != "" {
				path = u.Path
				break
			}
		}
	}
	if path == "" {
		return ""
	}
	route := templatePath(path)
	if method != "" {
		route = method + " " + route
	}
	return profiledict.Truncate(route)
}

// templatePath folds the parts of a path that name one thing of many (numbers, UUIDs, hex
// digests, tokens with digits) into `:id`, and drops the query: "/users/42/orders?x=1" ->
// "/users/:id/orders". Words stay, version segments too ("/v2").
func templatePath(path string) string {
	if i := strings.IndexAny(path, "?#"); i >= 0 {
		path = path[:i]
	}
	parts := strings.Split(path, "/")
	for i, p := range parts {
		if isIDSegment(p) {
			parts[i] = ":id"
		}
	}
	out := strings.Join(parts, "/")
	if out == "" {
		return "/"
	}
	return out
}

// isIDSegment: all digits; or a segment of 6 or more characters holding a digit (UUIDs, hex
// digests, "sku-1234", base64 tokens); not "v2" or "html5".
func isIDSegment(p string) bool {
	if p == "" {
		return false
	}
	digits, n := 0, 0
	for _, r := range p {
		n++
		if unicode.IsDigit(r) {
			digits++
		}
	}
	return digits == n || (digits > 0 && n >= 6)
}

// routesLearnt bounds the path templates whose route the samples told (an API has tens of
// endpoints); past it they are forgotten and learnt again.
const routesLearnt = 4_096

// routeBook names requests without http.route, and remembers which route the samples of
// requests of each method and path template carried: a request without a sample of its own (a
// short one: at 99 Hz an 8 ms handler has one sample or none) is then named as its siblings
// were, so that one endpoint is one route, not two.
type routeBook struct {
	byTemplate map[string]string
}

func newRouteBook() *routeBook {
	return &routeBook{byTemplate: map[string]string{}}
}

// name writes the route of an entry span without http.route: the GraphQL operation its process
// executed for its trace (operation, "" when none), else the one its samples carried
// (sampleRoute, "" when none), else the one the samples of requests with its method and path
// template carried, else its method and templated path. Nothing when it has its own route, is
// not an entry, or has no path either.
func (b *routeBook) name(s ptrace.Span, operation, sampleRoute string) {
	if !isEntry(s) || ownRoute(s) != "" {
		return
	}
	if _, done := s.Attributes().Get(AttrRoute); done {
		return
	}
	if operation != "" && s.Kind() == ptrace.SpanKindServer {
		s.Attributes().PutStr(AttrRoute, operation)
		s.Attributes().PutStr(AttrRouteSource, routeFromGraphQL)
		return
	}
	template := pathRoute(s)
	route, source := sampleRoute, routeFromSamples
	switch {
	case route != "" && template != "":
		if b.byTemplate[template] != route {
			if len(b.byTemplate) >= routesLearnt {
				clear(b.byTemplate)
			}
			b.byTemplate[template] = route
		}
	case route == "" && b.byTemplate[template] != "":
		route = b.byTemplate[template]
	case route == "":
		route, source = template, routeFromPath
	}
	if route == "" {
		return
	}
	s.Attributes().PutStr(AttrRoute, route)
	s.Attributes().PutStr(AttrRouteSource, source)
}

// requestName is what a trace is called in held_by when its samples carried no route: its
// entry span's route (http.route, else the templated path), else that span's name; "" for a
// root that is not a request (a timer's dns.lookup is no route).
func requestName(s ptrace.Span) string {
	if s.Kind() != ptrace.SpanKindServer {
		return ""
	}
	if r := ownRoute(s); r != "" && !isMountRoute(r) {
		return r
	}
	if r, ok := s.Attributes().Get(AttrRoute); ok {
		return r.AsString()
	}
	if r := pathRoute(s); r != "" {
		return r
	}
	return s.Name()
}
