# Sourced by the data-format scripts (cifar_data.sh, image_folder.sh):
#   expect_refused WHAT TEXT COMMAND...
# COMMAND must exit with status 2 and print TEXT; one line says whether it
# did. Its output goes to $d/refused.out (the script's temporary folder);
# a miss prints it and sets the script's status to 1.
expect_refused() {
    local what=$1 text=$2 rc=0
    shift 2
    "$@" > "$d/refused.out" 2>&1 || rc=$?
    if [ "$rc" = 2 ] && grep -qF -- "$text" "$d/refused.out"; then
        echo "$what: refused with status 2"
    else
        echo "$what: status $rc, not 2 with '$text': DIFFERENT"
        cat "$d/refused.out"
        status=1
    fi
}
