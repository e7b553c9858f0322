package gitrelay

// APIRoutes are apiRules' methods and paths, for the table walk.
func APIRoutes() [][2]string {
	var out [][2]string
	for _, r := range apiRules {
		out = append(out, [2]string{r.method, r.path})
	}
	return out
}

// JudgeGraphQL is judgeGraphQL for a Session of acme/app under prefix.
func JudgeGraphQL(body []byte, prefix string) string {
	_, why := judgeGraphQL(body, served{path: "acme/app", prefix: prefix})
	return why
}
