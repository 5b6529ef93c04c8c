// Arch.g4 - grammar of archc's `.arch` architecture description language.
//
// The language reference is docs/language.md. Statements need no separator:
// a statement starts with a keyword or with `name =`, and expressions never
// juxtapose, so a newline can end a statement without being a token.
// `for i in 0 .. n @ "scope" { ... }` parses the scope as part of the upper
// bound (a scope postfix); the AST builder moves it onto the loop.
//
// Every parser rule with more than one alternative labels them (`# Name`):
// the AST builder (compiler/frontend/antlr/AstBuilder.cpp) implements
// ArchVisitor, which has one pure virtual method per labeled alternative,
// so an alternative added here does not compile until the builder handles
// it (tests/unit/GrammarTest.cpp checks the labeling). Operator tokens must
// match the table in compiler/frontend/Operators.h (checked by the same test).
grammar Arch;

file : items+=item* EOF ;

item
  : importDecl   # ImportItem
  | archDecl     # ArchItem
  | defDecl      # DefItem
  ;

importDecl : IMPORT path=STRING ';'? ;

// `model_type "llama", ...` (a contextual word, so `model_type` stays a
// usable name): the config.json model types the arch claims.
archDecl
  : ARCH name=ID (EXTENDS base=ID)?
    (claim=ID modelTypes+=STRING (',' modelTypes+=STRING)*)?
    (MATCHES matches+=STRING (',' matches+=STRING)*)?
    '{' members+=archMember* '}'
  ;

archMember
  : configBlock  # ConfigMember
  | useDecl      # UseMember
  | defDecl      # DefMember
  | modelDecl    # ModelMember
  ;

// `use llama as text`: another arch's config (bound to the same config.json)
// and defs, reachable as `text.hidden_size`, `text.decoder(...)`.
useDecl : USE arch=ID (AS alias=ID)? ';'? ;

configBlock : CONFIG '{' entries+=configEntry* '}' ;

configEntry
  : name=ID ':' typeRef ('=' value=expr)?
    (ALIAS aliases+=STRING (',' aliases+=STRING)*)? ';'?                       # ConfigField
  | LET name=ID (':' typeRef)? '=' value=expr ';'?                             # ConfigLet
  | CHECK cond=expr (',' message=STRING)? ';'?                                 # ConfigCheck
  // `inert a, b, "c.d"` / `keep a, b`: contextual words (the AST builder
  // accepts only these two), so neither is reserved.
  | directive=ID names+=configName (',' names+=configName)* ';'?               # ConfigDirective
  ;

configName : value=(ID | STRING) ;

typeRef : name=ID ('<' elem=typeRef '>')? optional='?'? ;

defDecl : DEF name=ID '(' paramList? ')' body=block ;

paramList : params+=param (',' params+=param)* ','? ;

param : name=ID (':' typeRef)? ('=' value=expr)? ;

// `model (...)` is the arch's main graph; `model NAME (...)` one graph of a
// several-graph package (a vision-language model's vision_encoder,
// embedding and decoder).
modelDecl
  : MODEL name=ID? '(' inputList? ')' '->' '(' outputs+=ID (',' outputs+=ID)* ')'
    body=block
  ;

inputList : inputs+=modelInput (',' inputs+=modelInput)* ','? ;

modelInput : name=ID ':' dtype=ID '[' (dims+=expr (',' dims+=expr)*)? ']' ;

block : '{' stmts+=stmt* '}' ;

stmt
  : targets+=ID (',' targets+=ID)* '=' value=expr ';'?                # AssignStmt
  | target=ID op=('+=' | '-=' | '*=') value=expr ';'?                 # AugAssignStmt
  | FOR var=ID IN lo=expr '..' hi=expr body=block                     # ForStmt
  | ifChain                                                           # IfStmt
  | RETURN values+=expr (',' values+=expr)* ';'?                      # ReturnStmt
  | ERROR message=STRING ';'?                                         # ErrorStmt
  | CHECK cond=expr (',' message=STRING)? ';'?                        # CheckStmt
  ;

ifChain : IF cond=expr then=block (ELSE (elseIf=ifChain | otherwise=block))? ;

// Expressions. Binary operators form one flat chain; the AST builder
// applies precedence and associativity from the operator table
// (compiler/frontend/Operators.h), so a leaf expression enters 4 rules
// instead of one per precedence level.
expr : value=chain ('?' then=expr ':' otherwise=expr)? ;

chain : unary (binaryOp unary)* ;

binaryOp
  : op=( '*' | '/' | '%'
       | '+' | '-'
       | '<' | '<=' | '>' | '>=' | '==' | '!='
       | ANDOP | AND
       | OROP | OR )              # InfixOp
  | negated=NOT? IN               # MembershipOp
  ;

unary
  : op=('-' | '!' | NOT) operand=unary   # PrefixUnary
  | value=postfix                        # PostfixUnary
  ;

postfix : base=primary postfixOp* ;

postfixOp
  : '.' member=ID                # MemberOp
  | '(' args=argList? ')'        # CallOp
  | '[' index=expr ']'           # IndexOp
  | '@' scope=STRING             # ScopeOp
  ;

primary
  : value=INT                                        # IntLit
  | value=FLOAT                                      # FloatLit
  | value=STRING                                     # StringLit
  | value=(TRUE | FALSE)                             # BoolLit
  | NONE                                             # NoneLit
  | name=ID                                          # NameRef
  | '(' inner=expr ')'                               # ParenExpr
  | '[' (elems+=expr (',' elems+=expr)* ','?)? ']'   # ListLit
  | FN '(' paramList? ')' body=block                 # FnLit
  ;

argList : args+=arg (',' args+=arg)* ','? ;

arg : (name=ID ':')? value=expr ;

// Keywords.
IMPORT  : 'import' ;
ARCH    : 'arch' ;
MATCHES : 'matches' ;
EXTENDS : 'extends' ;
CONFIG  : 'config' ;
ALIAS   : 'alias' ;
USE     : 'use' ;
AS      : 'as' ;
LET     : 'let' ;
CHECK   : 'check' ;
DEF     : 'def' ;
MODEL   : 'model' ;
FOR     : 'for' ;
IN      : 'in' ;
IF      : 'if' ;
ELSE    : 'else' ;
RETURN  : 'return' ;
ERROR   : 'error' ;
FN      : 'fn' ;
TRUE    : 'true' ;
FALSE   : 'false' ;
NONE    : 'none' ;
AND     : 'and' ;
OR      : 'or' ;
NOT     : 'not' ;
OROP    : '||' ;
ANDOP   : '&&' ;

ID     : [a-zA-Z_] [a-zA-Z0-9_]* ;
FLOAT  : [0-9]+ '.' [0-9]+ EXPONENT? | [0-9]+ EXPONENT ;
INT    : [0-9]+ ;
STRING : '"' (~["\\\r\n] | '\\' ~[\r\n])* '"' ;

fragment EXPONENT : [eE] [+-]? [0-9]+ ;

LINE_COMMENT  : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS            : [ \t\r\n\f]+ -> skip ;
