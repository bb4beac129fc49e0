# bash completion for tl: commands, options per command, op names (from
# `tl ops`), devices, and file names.  Installed by `make install` as
# share/bash-completion/completions/tl; to try it: source cli/completion.bash
_tl()
{
    local cur prev words cword
    _init_completion -n = 2>/dev/null || {
        COMPREPLY=()
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD-1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    }
    local commands="run grad jvp hvp compare show check dot gradcheck compile diff ops devices"
    if [ "$cword" -eq 1 ]; then
        COMPREPLY=($(compgen -W "$commands help --help --version" -- "$cur"))
        return
    fi
    local cmd=${words[1]}
    if [ "$cmd" = help ]; then
        [ "$cword" -eq 2 ] && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
        return
    fi
    case $prev in
        -d|--device)
            COMPREPLY=($(compgen -W "cpu cuda cuda:0 gpu auto" -- "$cur")); return ;;
        --format)
            COMPREPLY=($(compgen -W "text json" -- "$cur")); return ;;
        -o|--output|--report|--expect|-i|--inputs|--seed|--tangent)
            COMPREPLY=($(compgen -f -- "$cur")); return ;;
    esac
    local common="-h --help"
    local opts
    case $cmd in
        run|grad|jvp|hvp)
            opts="-i --inputs -o --output --format --full -d --device --strict-device
                  --max-memory --allow-outside-files --expect --rtol --atol --ulp --equal-nan
                  --only --outputs --profile --report --check-finite -v --verbose -q --quiet -e"
            [ "$cmd" = grad ] && opts="$opts --seed --wrt --of --params"
            [ "$cmd" = jvp ] && opts="$opts --tangent --params"
            [ "$cmd" = hvp ] && opts="$opts --tangent --seed --wrt --of --params" ;;
        compare) opts="--rtol --atol --ulp --equal-nan --format" ;;
        show) opts="--stats --full --format" ;;
        check|dot) opts="-i --inputs --allow-outside-files -e" ;;
        gradcheck) opts="-i --inputs --seed --wrt --params --eps --rtol --atol --samples --order --f64 --format
                         --allow-outside-files -q --quiet -e" ;;
        compile) opts="-o --output -i --inputs --allow-outside-files -e" ;;
        diff) opts="-i --inputs --allow-outside-files -e" ;;
        ops)
            if [[ $cur != -* ]]; then
                COMPREPLY=($(compgen -W "$(tl ops 2>/dev/null | cut -d' ' -f1)" -- "$cur"))
                return
            fi
            opts="--format --onnx" ;;
        devices) opts="--format" ;;
        *) opts="" ;;
    esac
    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts $common" -- "$cur"))
    else
        COMPREPLY=($(compgen -f -- "$cur"))
    fi
}
complete -F _tl tl
