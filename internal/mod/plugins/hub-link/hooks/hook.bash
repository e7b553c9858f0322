# kndl's hook client, run by bash for each of the mod's hooks (hooks.json)
# where the Sandbox's init serves no hook door (booted by an earlier Runner):
# it carries one hook event (JSON on stdin) to the Runner's relay at
# $KNDL_URL with the Session token, and writes the relay's answer on
# stdout, where Claude Code reads the hook's decision. A bash script, not
# the kndl binary: each hook starts it, and the binary's start costs several
# times the CPU (internal/mod BenchmarkHookCPU). It speaks HTTP/1.0
# through bash's /dev/tcp, so the relay closes the connection after its
# answer, whatever its length. A hook never fails the Turn: what goes
# wrong is said on stderr, and it exits 0.
#
# While the relay can't be reached (its Runner restarting) or a restarted
# Runner waits for the Hub (503), it asks again every half second for 10 s
# (hookRetryFor in internal/mod), and Claude Code waits for it. A hook held
# at the relay (a question waiting for its answer) whose connection breaks
# gets those 10 s from the break: the restarted Runner asks it anew.
LC_ALL=C # characters are bytes: read -N and ${#body} count them
retry_for=10 max_bytes=1048576
addr=${KNDL_URL#http://}
if [[ $KNDL_URL != http://* || $addr != *:* || -z $KNDL_MOD_TOKEN ]]; then
	echo "kndl hook: KNDL_URL and KNDL_MOD_TOKEN are not set; is this a kndl Session?" >&2
	exit 0
fi
# Claude Code's stdin may be a socket, which /dev/stdin can't open; read -N
# reads it in blocks (without -N, bash reads a byte at a time).
IFS= read -r -N $((max_bytes + 1)) body
if ((${#body} > max_bytes)); then
	echo "kndl hook: event over $max_bytes bytes" >&2
	exit 0
fi
printf -v request 'POST /mod/hook HTTP/1.0\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s' \
	"$addr" "$KNDL_MOD_TOKEN" "${#body}" "$body"
until=$((SECONDS + retry_for))
while :; do
	status='' answer=''
	if { exec 3<>"/dev/tcp/${addr%:*}/${addr##*:}"; } 2>/dev/null; then
		printf '%s' "$request" >&3
		IFS=' ' read -r _ status _ <&3
		while IFS= read -r line <&3 && [[ $line != $'\r' && -n $line ]]; do :; done
		IFS= read -r -d '' answer <&3
		exec 3<&-
		# Cut off before an answer: the relay went away under a waiting hook.
		[[ -n $status ]] || until=$((SECONDS + retry_for))
	fi
	case $status in
	200)
		printf '%s' "$answer"
		exit 0
		;;
	'' | 503) ;; # the relay is away, or its Runner has not reconnected the Session yet
	*)
		echo "kndl hook: $status: $answer" >&2
		exit 0
		;;
	esac
	if ((SECONDS >= until)); then
		echo "kndl hook: the relay at $KNDL_URL did not answer for ${retry_for}s" >&2
		exit 0
	fi
	sleep 0.5
done
